#!/usr/bin/env bash
# traefik.sh — build Traefik, the real ingress controller of e2e scenario 13,
# from the Go module proxy, once, and print the binary's path.
#
# Usage: hack/traefik.sh
#
# stdout: exactly one line, the absolute path of bin/traefik-<version>.
#         Everything else goes to stderr.
#
# Source: github.com/traefik/traefik/v3 at TRAEFIK_VERSION (default below),
# built in its own module directory with its own go.mod and go.sum (so its
# replace directives apply and every dependency is the one Traefik pins),
# GOFLAGS=-mod=readonly, CGO_ENABLED=0. v3.6.12 is the newest release that
# builds with this repository's Go (v3.7's requirements do not). The web UI's
# assets are not in the module (its static/ holds a placeholder); the suite
# uses no dashboard.
#
# Reused while bin/traefik-<version>.stamp matches the version and the Go
# version. Cold build (an empty Go build cache for Traefik's dependencies,
# lego's DNS providers among them): 14 min of CPU; 45 min on the shared
# 2-core machine with a load average near 19, measured. With a warm Go
# build cache: 27 s (the link). Cached: instant.
set -euo pipefail

log() { printf 'traefik: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "${script_dir}/.." && pwd -P)
version=${TRAEFIK_VERSION:-v3.6.12}
[[ "${version}" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "TRAEFIK_VERSION=${version}: want v3.X.Y"
mkdir -p "${repo_root}/bin"
out="${repo_root}/bin/traefik-${version}"
stamp="${out}.stamp"
go_version=$(go env GOVERSION) || die "go not found in PATH"
want_stamp="github.com/traefik/traefik/v3@${version} ${go_version} CGO_ENABLED=0"

# shellcheck source=lib/build-once.sh
. "${script_dir}/lib/build-once.sh"
build_once "${out}" "${want_stamp}"

start=${SECONDS}
mod_dir=$(cd "${repo_root}" && GOWORK=off GOFLAGS= go mod download -json "github.com/traefik/traefik/v3@${version}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || die "go mod download github.com/traefik/traefik/v3@${version} failed"
[[ -n "${mod_dir}" && -f "${mod_dir}/go.mod" ]] || die "no module directory for github.com/traefik/traefik/v3@${version}"

tmp="${out}.tmp.$$"
child=""
cleanup() {
	if [[ -n "${child}" ]]; then kill "${child}" 2>/dev/null || true; fi
	rm -f "${tmp}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building Traefik ${version} from the Go module proxy into ${out} (cold: 14 min of CPU, longer on busy cores)"
# In the background and waited for, so that INT/TERM reach this script's
# traps at once and the build is stopped.
(cd "${mod_dir}" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly exec go build -trimpath \
	-ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=${version}" \
	-o "${tmp}" ./cmd/traefik >&2) &
child=$!
wait "${child}"
child=""
got=$("${tmp}" version 2>&1) || die "traefik version failed: ${got}"
[[ "${got}" == *"${version}"* ]] || die "the build reports '${got}', want ${version}"
mv -f "${tmp}" "${out}"
printf '%s\n' "${want_stamp}" >"${stamp}"
log "ready in $((SECONDS - start))s: ${out}"
printf '%s\n' "${out}"
