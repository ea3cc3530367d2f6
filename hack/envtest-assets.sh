#!/usr/bin/env bash
# envtest-assets.sh — provide kube-apiserver and etcd (and optionally other
# Kubernetes components) for controller-runtime envtest.
#
# Usage:
#   hack/envtest-assets.sh [COMPONENT...]
#
#   COMPONENT  extra binaries to ensure next to kube-apiserver and etcd, any of:
#              kubelet kube-controller-manager kube-scheduler kube-proxy kubectl
#
# stdout: exactly one line, the absolute directory holding the binaries
#         (suitable as KUBEBUILDER_ASSETS). Everything else goes to stderr.
#
# Environment:
#   KUBEBUILDER_ASSETS        if it already holds every requested binary, it is
#                             printed as-is and nothing else happens.
#   ENVTEST_K8S_VERSION       Kubernetes version, MAJOR.MINOR.PATCH (e.g. 1.37.2);
#                             default: derived from k8s.io/api in go.mod
#                             (v0.37.2 -> 1.37.2).
#   ENVTEST_SKIP_SETUP_ENVTEST=1   do not try setup-envtest (go straight to
#                             building from the Go module proxy).
#   SETUP_ENVTEST_TIMEOUT     seconds allowed for the setup-envtest attempt
#                             (default 60).
#
# Sources, in order:
#   1. $KUBEBUILDER_ASSETS (if complete)
#   2. bin/k8s/<version>/ in the repo, when each binary has a matching line in
#      bin/k8s/<version>/.stamp
#   3. setup-envtest (pinned) — only for kube-apiserver/etcd/kubectl
#   4. build from source via the Go module proxy into bin/k8s/<version>/
#      (kube-apiserver cold: ~11+ min on 2 cores).
#
# Binaries are built under temporary names and moved into place, and the
# stamp is written last, so an interrupted run never leaves a binary that
# would be reused.

set -euo pipefail

SETUP_ENVTEST_VERSION=v0.25.1
ETCD_VERSION=v3.6.16
SETUP_ENVTEST_TIMEOUT=${SETUP_ENVTEST_TIMEOUT:-60}

log() { printf 'envtest-assets: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd "${script_dir}/.." && pwd -P)

# ---------------------------------------------------------------- arguments
extras=()
for arg in "$@"; do
	case "${arg}" in
	-h | --help)
		usage
		exit 0
		;;
	kubelet | kube-controller-manager | kube-scheduler | kube-proxy | kubectl)
		case " ${extras[*]-} " in
		*" ${arg} "*) ;;
		*) extras+=("${arg}") ;;
		esac
		;;
	*)
		die "unknown component '${arg}'; accepted: kubelet kube-controller-manager kube-scheduler kube-proxy kubectl"
		;;
	esac
done
required=(kube-apiserver etcd ${extras[@]+"${extras[@]}"})

have_all() { # have_all DIR BIN... : every BIN is an executable file in DIR
	local dir=$1 b
	shift
	for b in "$@"; do
		[[ -f "${dir}/${b}" && -x "${dir}/${b}" ]] || return 1
	done
}

# ------------------------------------------------- 1. KUBEBUILDER_ASSETS as given
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
	if have_all "${KUBEBUILDER_ASSETS}" "${required[@]}"; then
		(cd "${KUBEBUILDER_ASSETS}" && pwd -P)
		exit 0
	fi
	log "KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS} lacks some of: ${required[*]}; ignoring it"
fi

# ------------------------------------------------------------------ version
version_from_gomod() {
	local gomod="${repo_root}/go.mod" v
	[[ -f "${gomod}" ]] || die "cannot derive the Kubernetes version: ${gomod} not found; set ENVTEST_K8S_VERSION (e.g. 1.37.2)"
	v=$(awk '
		$1 ~ /^\/\// { next }
		$1 == "require" && $2 == "(" { inreq = 1; next }
		inreq && $1 == ")" { inreq = 0; next }
		$1 == "require" && $2 == "k8s.io/api" { print $3; exit }
		inreq && $1 == "k8s.io/api" { print $2; exit }
	' "${gomod}")
	[[ -n "${v}" ]] || die "cannot derive the Kubernetes version: no k8s.io/api requirement in ${gomod}; set ENVTEST_K8S_VERSION (e.g. 1.37.2)"
	[[ "${v}" =~ ^v0\.([0-9]+\.[0-9]+.*)$ ]] ||
		die "cannot derive the Kubernetes version from k8s.io/api ${v} in ${gomod} (expected v0.MINOR.PATCH); set ENVTEST_K8S_VERSION (e.g. 1.37.2)"
	printf '1.%s\n' "${BASH_REMATCH[1]}"
}

if [[ -n "${ENVTEST_K8S_VERSION:-}" ]]; then
	k8s_version=${ENVTEST_K8S_VERSION}
	version_origin="ENVTEST_K8S_VERSION"
else
	k8s_version=$(version_from_gomod)
	version_origin="k8s.io/api in go.mod"
fi
version_re='^1\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.[0-9]+)?$'
[[ "${k8s_version}" =~ ${version_re} ]] ||
	die "invalid Kubernetes version '${k8s_version}' (from ${version_origin}); accepted form: 1.MINOR.PATCH[-alpha|beta|rc.N], e.g. 1.37.2 (no leading 'v')"
k8s_minor=${BASH_REMATCH[1]}
# staging modules (k8s.io/api, ...) are tagged v0.MINOR.PATCH[-pre] for v1.MINOR.PATCH[-pre]
staging_version="v0.${k8s_version#1.}"

out_dir="${repo_root}/bin/k8s/${k8s_version}"
stamp="${out_dir}/.stamp"

# --------------------------------------------------------------- stamp file
# One line per binary: "<binary> <key> <details...>". A binary is reused when
# its line's key is what this script would build (or came from setup-envtest
# for the same version).
build_key() {
	case "$1" in
	etcd) printf 'go.etcd.io/etcd/server/v3@%s\n' "${ETCD_VERSION}" ;;
	*) printf 'k8s.io/kubernetes@v%s\n' "${k8s_version}" ;;
	esac
}

stamp_key() { # stamp_key BIN -> key recorded for BIN, or nothing
	[[ -f "${stamp}" ]] || return 0
	awk -v b="$1" '$1 == b { k = $2 } END { if (k != "") print k }' "${stamp}"
}

cached() { # cached BIN : BIN in out_dir is complete and stamped as acceptable
	local b=$1 k
	have_all "${out_dir}" "${b}" || return 1
	k=$(stamp_key "${b}")
	[[ "${k}" == "$(build_key "${b}")" || "${k}" == "setup-envtest@${SETUP_ENVTEST_VERSION}/${k8s_version}" ]]
}

stamp_set() { # stamp_set BIN KEY DETAILS... : (re)write BIN's line atomically
	local b=$1 tmp
	shift
	tmp=$(mktemp "${out_dir}/.stamp.XXXXXX")
	if [[ -f "${stamp}" ]]; then
		awk -v b="${b}" '$1 != b' "${stamp}" >"${tmp}"
	fi
	printf '%s %s\n' "${b}" "$*" >>"${tmp}"
	sort -o "${tmp}" "${tmp}"
	chmod 0644 "${tmp}"
	mv -f "${tmp}" "${stamp}"
}

missing() {
	local b
	for b in "${required[@]}"; do
		cached "${b}" || printf '%s\n' "${b}"
	done
}

# ------------------------------------------------------------ 2. local cache
# Cheap, lock-free fast path.
if [[ -z "$(missing)" ]]; then
	printf '%s\n' "${out_dir}"
	exit 0
fi

mkdir -p "${out_dir}"
locked=0
if command -v flock >/dev/null 2>&1; then
	exec 9>"${out_dir}/.lock"
	if ! flock -n 9; then
		log "another run holds ${out_dir}/.lock; waiting"
		flock 9
	fi
	locked=1
fi

mapfile -t todo < <(missing)
if ((${#todo[@]} == 0)); then # built by a concurrent run while we waited
	printf '%s\n' "${out_dir}"
	exit 0
fi
log "Kubernetes ${k8s_version} (from ${version_origin}); need: ${todo[*]} in ${out_dir}"

# Holding the lock, leftovers of interrupted runs are junk.
if ((locked)); then
	rm -rf "${out_dir}"/.tmp.* "${out_dir}"/.*.tmp.* "${out_dir}"/.stamp.?*
fi

tmp_dirs=()
child=""
cleanup() {
	local d
	if [[ -n "${child}" ]]; then kill "${child}" 2>/dev/null || true; fi
	for d in ${tmp_dirs[@]+"${tmp_dirs[@]}"}; do
		rm -rf "${d}"
	done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go_version=$(go env GOVERSION) || die "go not found in PATH"

check_version() { # check_version FILE : FILE --version reports the wanted version
	local file=$1 name=$2 want out
	case "${name}" in
	etcd) want="etcd Version: ${ETCD_VERSION#v}" ;;
	kubectl) want="v${k8s_version}" ;;
	*) want="Kubernetes v${k8s_version}" ;;
	esac
	if [[ "${name}" == kubectl ]]; then
		out=$("${file}" version --client 2>&1) || true
	else
		out=$("${file}" --version 2>&1) || true
	fi
	if [[ "${out}" != *"${want}"* ]]; then
		log "${name}: '${file} --version' printed: ${out}"
		log "${name}: expected it to contain '${want}'"
		return 1
	fi
	log "${name}: $(head -n1 <<<"${out}")"
}

# ------------------------------------------------------------ 3. setup-envtest
try_setup_envtest() {
	local want=() b dir store out rc
	for b in "${todo[@]}"; do
		case "${b}" in kube-apiserver | etcd | kubectl) want+=("${b}") ;; esac
	done
	# Only worth it when the heavy pair is missing.
	case " ${want[*]-} " in
	*" kube-apiserver "* | *" etcd "*) ;;
	*) return 1 ;;
	esac
	if [[ "${ENVTEST_SKIP_SETUP_ENVTEST:-}" == 1 ]]; then
		log "ENVTEST_SKIP_SETUP_ENVTEST=1: not trying setup-envtest"
		return 1
	fi
	store="${repo_root}/bin/k8s/.setup-envtest"
	mkdir -p "${store}"
	local cmd=(go run "sigs.k8s.io/controller-runtime/tools/setup-envtest@${SETUP_ENVTEST_VERSION}"
		use "${k8s_version}" --bin-dir "${store}" -p path)
	if command -v timeout >/dev/null 2>&1; then
		cmd=(timeout --kill-after=10 "${SETUP_ENVTEST_TIMEOUT}" "${cmd[@]}")
	fi
	log "trying setup-envtest ${SETUP_ENVTEST_VERSION} (timeout ${SETUP_ENVTEST_TIMEOUT}s)"
	rc=0
	out=$(cd "${store}" && GOWORK=off GOFLAGS=-buildvcs=false "${cmd[@]}" 2>&1) || rc=$?
	dir=$(tail -n1 <<<"${out}")
	if ((rc != 0)) || [[ -z "${dir}" || ! -d "${dir}" ]]; then
		log "setup-envtest failed (exit ${rc}): $(tail -n3 <<<"${out}" | tr '\n' ' ')"
		return 1
	fi
	have_all "${dir}" kube-apiserver etcd || {
		log "setup-envtest gave ${dir} without kube-apiserver/etcd"
		return 1
	}
	for b in "${want[@]}"; do
		[[ -x "${dir}/${b}" ]] || continue
		cp -f "${dir}/${b}" "${out_dir}/.${b}.tmp.$$"
		if ! check_version "${out_dir}/.${b}.tmp.$$" "${b}"; then
			rm -f "${out_dir}/.${b}.tmp.$$"
			return 1
		fi
		mv -f "${out_dir}/.${b}.tmp.$$" "${out_dir}/${b}"
		stamp_set "${b}" "setup-envtest@${SETUP_ENVTEST_VERSION}/${k8s_version}" "from=${dir}"
	done
	log "installed from setup-envtest: ${want[*]}"
}

# --------------------------------------------------------- 4. build from source
# A throw-away tools module per source, under bin/k8s/<version>/.build/ (bin/
# is ignored and the nested go.mod keeps it out of the repo's ./... anyway).
tools_go() { # go with settings for the throw-away tools modules
	GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" go "$@"
}

tools_go_in() { # tools_go_in DIR ARGS... : static (CGO_ENABLED=0) go ARGS in DIR, stdout to stderr
	local dir=$1
	shift
	cd "${dir}" && CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" exec go "$@" >&2
}

# Long builds run in the background and are waited for, so that INT/TERM sent
# to this script are handled at once (bash defers traps while a foreground
# child runs) and the EXIT trap stops the build and removes its temp dir.
run_waited() {
	"$@" &
	child=$!
	wait "${child}"
	child=""
}

init_tools_module() { # init_tools_module DIR MODPATH
	local dir=$1 modpath=$2
	mkdir -p "${dir}"
	if [[ ! -f "${dir}/go.mod" ]]; then
		(cd "${dir}" && tools_go mod init "${modpath}" >&2)
	fi
}

write_tools_go() { # write_tools_go DIR IMPORT...
	local dir=$1 imp
	shift
	{
		printf '//go:build tools\n\n// Code generated by hack/envtest-assets.sh. DO NOT EDIT.\n\npackage tools\n\nimport (\n'
		for imp in "$@"; do
			printf '\t_ "%s"\n' "${imp}"
		done
		printf ')\n'
	} >"${dir}/tools.go"
}

build_kubernetes() { # build_kubernetes COMPONENT...
	local mod_dir="${out_dir}/.build/kubernetes" json kgomod staging=() m imports=() c tmp ldflags
	log "building $* from k8s.io/kubernetes@v${k8s_version} (kube-apiserver alone takes ~11+ min cold on 2 cores)"
	init_tools_module "${mod_dir}" "envtest-tools.local/kubernetes"

	json=$(cd "${mod_dir}" && tools_go mod download -json "k8s.io/kubernetes@v${k8s_version}") ||
		die "go mod download k8s.io/kubernetes@v${k8s_version} failed: ${json}"
	kgomod=$(tr -d ' \t\n' <<<"${json}" | grep -oE '"GoMod":"[^"]+"' | head -n1 | sed -E 's/^"GoMod":"(.*)"$/\1/')
	[[ -n "${kgomod}" && -f "${kgomod}" ]] || die "no GoMod in: ${json}"

	# Every "k8s.io/x => ./staging/src/k8s.io/x" in kubernetes' go.mod becomes
	# "k8s.io/x => k8s.io/x v0.MINOR.PATCH" (kubernetes itself requires them at v0.0.0).
	mapfile -t staging < <(
		cd "${mod_dir}" && tools_go mod edit -json "${kgomod}" | tr -d ' \t\n' |
			grep -oE '"Old":\{"Path":"[^"]+"[^}]*\},"New":\{"Path":"\./staging/[^"]+"' |
			sed -E 's/^"Old":\{"Path":"([^"]+)".*/\1/' | sort -u
	)
	((${#staging[@]} > 0)) || die "found no ./staging replaces in ${kgomod}"
	log "${#staging[@]} staging replaces -> ${staging_version}"
	local edits=(-require="k8s.io/kubernetes@v${k8s_version}")
	for m in "${staging[@]}"; do
		edits+=(-replace="${m}=${m}@${staging_version}")
	done
	(cd "${mod_dir}" && tools_go mod edit "${edits[@]}")

	# Import kube-apiserver, what we build now and what was built before, so
	# that tidy keeps one stable module for all of them.
	local all=(kube-apiserver "$@") seen=" "
	for c in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl; do
		if [[ -x "${out_dir}/${c}" ]]; then all+=("${c}"); fi
	done
	for c in "${all[@]}"; do
		if [[ "${seen}" == *" ${c} "* ]]; then continue; fi
		seen+="${c} "
		imports+=("k8s.io/kubernetes/cmd/${c}")
	done
	write_tools_go "${mod_dir}" "${imports[@]}"
	log "go mod tidy in ${mod_dir}"
	(cd "${mod_dir}" && tools_go mod tidy >&2)

	local targets=()
	for c in "$@"; do
		targets+=("k8s.io/kubernetes/cmd/${c}")
	done

	ldflags="-s -w"
	for m in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${m}.gitVersion=v${k8s_version} -X ${m}.gitMajor=1 -X ${m}.gitMinor=${k8s_minor} -X ${m}.gitTreeState=clean"
	done
	tmp=$(mktemp -d "${out_dir}/.tmp.XXXXXX")
	tmp_dirs+=("${tmp}")
	log "go build ${targets[*]}"
	run_waited tools_go_in "${mod_dir}" build -trimpath -ldflags "${ldflags}" -o "${tmp}/" "${targets[@]}"
	for c in "$@"; do
		check_version "${tmp}/${c}" "${c}" || die "${c} built but reports the wrong version"
	done
	for c in "$@"; do
		mv -f "${tmp}/${c}" "${out_dir}/${c}"
		stamp_set "${c}" "$(build_key "${c}")" "${go_version} CGO_ENABLED=0 staging=${staging_version}"
	done
}

build_etcd() {
	local mod_dir="${out_dir}/.build/etcd" tmp
	log "building etcd from go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
	init_tools_module "${mod_dir}" "envtest-tools.local/etcd"
	(cd "${mod_dir}" && tools_go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}")
	write_tools_go "${mod_dir}" go.etcd.io/etcd/server/v3
	(cd "${mod_dir}" && tools_go mod tidy >&2)
	tmp=$(mktemp -d "${out_dir}/.tmp.XXXXXX")
	tmp_dirs+=("${tmp}")
	run_waited tools_go_in "${mod_dir}" build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" go.etcd.io/etcd/server/v3
	check_version "${tmp}/etcd" etcd || die "etcd built but reports the wrong version"
	mv -f "${tmp}/etcd" "${out_dir}/etcd"
	stamp_set etcd "$(build_key etcd)" "${go_version} CGO_ENABLED=0"
}

try_setup_envtest || true
mapfile -t todo < <(missing)

kube_todo=()
for b in ${todo[@]+"${todo[@]}"}; do
	case "${b}" in
	etcd) build_etcd ;;
	*) kube_todo+=("${b}") ;;
	esac
done
if ((${#kube_todo[@]} > 0)); then
	build_kubernetes "${kube_todo[@]}"
fi

mapfile -t todo < <(missing)
((${#todo[@]} == 0)) || die "still missing after build: ${todo[*]}"
log "ready: ${out_dir}"
printf '%s\n' "${out_dir}"
