# build-once.sh — sourced by the scripts that build a third-party binary
# from the Go module proxy once into bin/ (hack/traefik.sh,
# hack/argo-rollouts.sh).
#
# build_once OUT WANT_STAMP: when OUT is built and OUT.stamp says
# WANT_STAMP, print OUT and exit 0. Otherwise hold OUT.lock (waiting for
# another run that holds it, then looking again: it may have built OUT)
# and return with the stamp removed, so that an interrupted build is never
# reused. The caller builds OUT and writes the stamp last.
build_once() {
	local out=$1 want=$2
	if [[ -x "${out}" && -f "${out}.stamp" && "$(cat "${out}.stamp")" == "${want}" ]]; then
		printf '%s\n' "${out}"
		exit 0
	fi
	exec 9>"${out}.lock"
	if ! flock -n 9; then
		log "another run holds ${out}.lock; waiting"
		flock 9
	fi
	if [[ -x "${out}" && -f "${out}.stamp" && "$(cat "${out}.stamp")" == "${want}" ]]; then
		printf '%s\n' "${out}"
		exit 0
	fi
	rm -f "${out}.stamp"
}
