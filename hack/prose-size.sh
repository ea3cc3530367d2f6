#!/bin/sh
# prose-size.sh — bytes of hand-written prose in the Markdown docs: each
# file's bytes minus its generated regions (from a <!-- NAME:begin -->
# line to its <!-- NAME:end --> line, both included) and minus its fenced
# code blocks (``` or ~~~ fences, both included). Issue 44 asks for the
# hand-written prose to shrink by a third; this is how it is measured.
#
# Usage:
#   hack/prose-size.sh            the hand-written pages (the list below)
#   hack/prose-size.sh FILE...    those files
# Prints "bytes file" per file, then "bytes total". POSIX sh and awk only.
set -eu
cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
  set -- docs/admission.md docs/annotations.md docs/meshes.md docs/observer.md \
    docs/plugin.md docs/release.md docs/routing-profiles.md docs/alerts.md \
    docs/reports.md docs/ci.md docs/security.md CONTRIBUTING.md
fi

LC_ALL=C awk '
FNR == 1 { gen = ""; fence = "" }
{
  line = $0
  if (gen != "") {                      # inside a generated region
    if (index(line, "<!-- " gen ":end -->") == 1) gen = ""
    next
  }
  if (fence != "") {                    # inside a fenced code block
    t = line; sub(/^[ \t]+/, "", t)
    if (index(t, fence) == 1) fence = ""
    next
  }
  if (match(line, /^<!-- [A-Za-z0-9_-]+:begin -->/)) {
    gen = substr(line, 6, RLENGTH - 15)
    next
  }
  t = line; sub(/^[ \t]+/, "", t)
  if (index(t, "```") == 1) { fence = "```"; next }
  if (index(t, "~~~") == 1) { fence = "~~~"; next }
  bytes[FILENAME] += length(line) + 1
}
END {
  total = 0
  for (i = 1; i < ARGC; i++) {
    f = ARGV[i]
    printf "%7d %s\n", bytes[f] + 0, f
    total += bytes[f]
  }
  printf "%7d total\n", total
}
' "$@"
