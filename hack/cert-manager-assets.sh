#!/usr/bin/env bash
# cert-manager-assets.sh — build cert-manager's controller and cainjector and
# copy its CRDs, for the envtest suite that runs graceguard in cert-manager
# mode (test/certmanager).
#
# Usage: hack/cert-manager-assets.sh
#
# stdout: exactly one line, the absolute directory holding `controller`,
#         `cainjector` and `crds/*.yaml` (CERT_MANAGER_ASSETS). Everything
#         else goes to stderr.
#
# Sources: github.com/cert-manager/cert-manager at the version pinned in
# hack/cert-manager/go.mod (go.sum pins every dependency), from the Go module
# proxy. cert-manager does not publish its cmd/ modules there, so the two
# mains are hack/cert-manager/{controller,cainjector}/main.go: thin wiring of
# cert-manager's own controller and injector packages (see their comments).
#
# Built into bin/cert-manager/<version>/ and reused while .stamp matches the
# sources' checksum and the Go version. Cold build: ~2 min on 2 cores with
# a Go build cache already warm for k8s.io (2m07s measured), ~5 min with an
# empty one; warm: instant.
#
# Environment:
#   CERT_MANAGER_ASSETS  if it already holds controller, cainjector and
#                        crds/, it is printed as-is and nothing is built.
set -euo pipefail

log() { printf 'cert-manager-assets: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "${script_dir}/.." && pwd -P)
src="${script_dir}/cert-manager"

complete() { # complete DIR
	[[ -x "$1/controller" && -x "$1/cainjector" && -f "$1/crds/cert-manager.io_certificates.yaml" ]]
}

if [[ -n "${CERT_MANAGER_ASSETS:-}" ]]; then
	if complete "${CERT_MANAGER_ASSETS}"; then
		(cd "${CERT_MANAGER_ASSETS}" && pwd -P)
		exit 0
	fi
	log "CERT_MANAGER_ASSETS=${CERT_MANAGER_ASSETS} lacks controller, cainjector or crds/; ignoring it"
fi

gomod() { (cd "${src}" && GOWORK=off GOFLAGS=-mod=readonly go "$@"); }

cm_version=$(awk '$1 == "github.com/cert-manager/cert-manager" { print $2; exit }' "${src}/go.mod")
[[ "${cm_version}" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "no github.com/cert-manager/cert-manager vX.Y.Z requirement in ${src}/go.mod (found '${cm_version}')"
out_dir="${repo_root}/bin/cert-manager/${cm_version}"
stamp="${out_dir}/.stamp"
go_version=$(go env GOVERSION) || die "go not found in PATH"
sources_sum=$(cd "${src}" && cat go.mod go.sum controller/main.go cainjector/main.go | sha256sum | cut -c1-16)
want_stamp="cert-manager=${cm_version} sources=${sources_sum} ${go_version} CGO_ENABLED=0"

if complete "${out_dir}" && [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want_stamp}" ]]; then
	printf '%s\n' "${out_dir}"
	exit 0
fi

mkdir -p "${out_dir}"
exec 9>"${out_dir}/.lock"
if ! flock -n 9; then
	log "another run holds ${out_dir}/.lock; waiting"
	flock 9
fi
if complete "${out_dir}" && [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want_stamp}" ]]; then
	printf '%s\n' "${out_dir}"
	exit 0
fi
rm -f "${stamp}"

tmp=$(mktemp -d "${out_dir}/.tmp.XXXXXX")
child=""
cleanup() {
	if [[ -n "${child}" ]]; then kill "${child}" 2>/dev/null || true; fi
	rm -rf "${tmp}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building cert-manager ${cm_version} controller and cainjector into ${out_dir} (~2-5 min cold on 2 cores)"
start=${SECONDS}
# In the background and waited for, so that INT/TERM reach this script's
# traps at once and the build is stopped.
(cd "${src}" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly exec go build -trimpath \
	-ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${cm_version}" \
	-o "${tmp}/" ./controller ./cainjector >&2) &
child=$!
wait "${child}"
child=""
for b in controller cainjector; do
	out=$("${tmp}/${b}" --version 2>&1) || die "${b} --version failed: ${out}"
	[[ "${out}" == *" ${cm_version} "* ]] || die "${b} reports '${out}', want ${cm_version}"
	log "${out}"
done

mod_dir=$(gomod list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager) || die "cannot locate github.com/cert-manager/cert-manager ${cm_version} in the module cache"
[[ -d "${mod_dir}/deploy/crds" ]] || die "${mod_dir} has no deploy/crds"
mkdir -p "${tmp}/crds"
cp "${mod_dir}"/deploy/crds/*.yaml "${tmp}/crds/"
chmod -R u+w "${tmp}/crds"

rm -rf "${out_dir}/crds"
mv "${tmp}/crds" "${out_dir}/crds"
mv -f "${tmp}/controller" "${tmp}/cainjector" "${out_dir}/"
printf '%s\n' "${want_stamp}" >"${stamp}"
log "ready in $((SECONDS - start))s: ${out_dir}"
printf '%s\n' "${out_dir}"
