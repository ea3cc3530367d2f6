#!/usr/bin/env bash
# version.sh — print graceguard's version, from git, as a semantic version
# with a leading v (what krew, Helm and internal/version accept):
#
#   at a tag vX.Y.Z                 vX.Y.Z
#   N commits after it              vX.Y.Z-N-g<sha12>
#   no vX.Y.Z tag reachable         v0.0.0-dev+<sha12>
#   uncommitted changes (tracked)   +dirty (or .dirty after a +)
#   not a git checkout              v0.0.0-dev
#
# `make build`, `make dist` and `make image-oci` link it into both binaries
# (VERSION=... overrides it). GRACEGUARD_REPO (default: this repository)
# is where git looks, for tests.
set -euo pipefail
repo=${GRACEGUARD_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)}
g() { git -C "${repo}" "$@"; }

if ! sha=$(g rev-parse --short=12 HEAD 2>/dev/null); then
	echo v0.0.0-dev
	exit 0
fi
dirty=
# Refresh the index first, so that a touched but unchanged file is not dirty.
g update-index -q --refresh >/dev/null 2>&1 || true
if ! g diff-index --quiet HEAD -- 2>/dev/null; then
	dirty=1
fi
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if desc=$(g describe --tags --abbrev=12 --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null) && [[ "${desc}" =~ ${semver} ]]; then
	v=${desc}
	if [[ -n "${dirty}" ]]; then v+="+dirty"; fi
else
	v="v0.0.0-dev+${sha}"
	if [[ -n "${dirty}" ]]; then v+=".dirty"; fi
fi
echo "${v}"
