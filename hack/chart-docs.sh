#!/usr/bin/env bash
# chart-docs.sh — regenerate charts/*/README.md from README.md.gotmpl and the
# `# --` comments in values.yaml, with helm-docs (pinned, from the Go module
# proxy). Fails when helm-docs skips a chart or warns. (helm-docs' strict mode
# only recognises `# key.path --` comments, so test/chart's
# TestEveryValueIsDocumented checks that every value has a `# --` comment.)
#
# Usage:
#   hack/chart-docs.sh          rewrite the README
#   hack/chart-docs.sh --check  fail if the README is not what the generator
#                               would write (for CI); change nothing
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_DOCS_VERSION=v1.14.2
GO=${GO:-go}

args=(
  --chart-search-root charts
  --template-files README.md.gotmpl
  --sort-values-order file
  --log-level warning
)
# helm-docs exits 0 after skipping a chart it cannot parse; its warnings are
# errors here.
helm_docs() {
  local log
  log=$(mktemp)
  "$GO" run "github.com/norwoodj/helm-docs/cmd/helm-docs@${HELM_DOCS_VERSION}" "${args[@]}" "$@" 2>"$log" || { cat "$log" >&2; rm -f "$log"; return 1; }
  if grep -q 'level=\(warning\|error\|fatal\)' "$log"; then
    cat "$log" >&2
    rm -f "$log"
    echo "helm-docs warned; README not (fully) generated" >&2
    return 1
  fi
  rm -f "$log"
}

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r charts "$tmp/"
  (cd "$tmp" && helm_docs)
  stale=0
  for chart in charts/*/Chart.yaml; do
    readme="$(dirname "$chart")/README.md"
    [[ -f "$readme" ]] || { echo "$readme is missing: run hack/chart-docs.sh" >&2; stale=1; continue; }
    if ! diff -u "$readme" "$tmp/$readme"; then
      echo "$readme is stale: run hack/chart-docs.sh" >&2
      stale=1
    fi
  done
  exit "$stale"
fi

helm_docs
