#!/usr/bin/env bash
# generate.sh — regenerate what is derived from Go: the API's deep-copy
# functions (pkg/api/v1alpha1/zz_generated.deepcopy.go) and its
# CustomResourceDefinition (charts/graceguard/files/crds/, which the chart's
# templates/crds.yaml installs and upgrades) from the Go types, with
# controller-gen (pinned, from the Go module proxy); and, with hack/generate,
# the chart's logic that restates the webhook's tables
# (charts/graceguard/templates/_generated.tpl) and the generated tables of
# README.md and docs/.
#
# Usage:
#   hack/generate.sh          rewrite the generated files
#   hack/generate.sh --check  fail if they are not what the generator would
#                             write (for CI); change nothing
set -euo pipefail
cd "$(dirname "$0")/.."

CONTROLLER_TOOLS_VERSION=v0.23.0
GO=${GO:-go}

generate() { # $1: output root (a copy of the repo's generated paths)
  local out=$1
  "$GO" run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" \
    object paths=./pkg/api/... output:object:dir="$out/pkg/api/v1alpha1"
  "$GO" run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" \
    crd paths=./pkg/api/... output:crd:dir="$out/charts/graceguard/files/crds"
}

if [[ "${1:-}" == "--check" ]]; then
  stale=0
  "$GO" -C hack run ./generate -check || stale=1
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  generate "$tmp"
  for f in pkg/api/v1alpha1/zz_generated.deepcopy.go charts/graceguard/files/crds/graceguard.io_shutdownreports.yaml; do
    if ! diff -u "$f" "$tmp/$f"; then
      echo "$f is stale: run make generate" >&2
      stale=1
    fi
  done
  exit "$stale"
fi

generate .
"$GO" -C hack run ./generate
