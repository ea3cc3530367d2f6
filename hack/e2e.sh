#!/usr/bin/env bash
# make e2e: graceguard's end-to-end suite on a real single-node cluster.
#
# Builds the runner (test/e2e/cmd/e2e) and execs it, so that Ctrl-C and
# SIGTERM reach it directly: it brings the cluster up (building and caching
# Kubernetes, containerd and the images under bin/ on first use), runs
# `go -C test test -tags e2e ./e2e/`, always tears the cluster down, and renders
# the evidence into bin/e2e/<timestamp>/ and, for a passing run, docs/e2e.md.
# graceguard runs from its release image: `make image-oci` (the same build as
# `make dist`'s image, digest for digest) into dist/image/, imported into
# the node's containerd; the suite checks the replicas run that digest.
# Scenario 9's proxy image carries a static busybox (sh, sleep): `busybox` on
# the PATH (Debian: busybox-static) or $GG_E2E_BUSYBOX.
# Beside the node run a real Prometheus and kube-state-metrics (make e2e-tools
# builds them once into bin/): the suite loads the chart's alerts into it.
# Scenario 13's ingress is a real Traefik built from the Go module proxy
# (hack/traefik.sh, once into bin/traefik-<version>), named in GG_E2E_TRAEFIK.
# Scenario 18's Argo Rollouts controller likewise (hack/argo-rollouts.sh, once
# into bin/argo-rollouts-<version>), named in GG_E2E_ARGO_ROLLOUTS.
# Linux, root. Flags go to the runner: -focus REGEXP, -keep, -docs pass|always|never, -timeout 60m.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
make --no-print-directory image-oci
export GG_E2E_IMAGE="${PWD}/dist/image/image.json"
make --no-print-directory e2e-tools
eval "$(make --no-print-directory -s e2e-tools-env)"
GG_E2E_TRAEFIK="${GG_E2E_TRAEFIK:-$(hack/traefik.sh)}"
export GG_E2E_TRAEFIK
GG_E2E_ARGO_ROLLOUTS="${GG_E2E_ARGO_ROLLOUTS:-$(hack/argo-rollouts.sh)}"
export GG_E2E_ARGO_ROLLOUTS
go -C test build -o ../bin/e2e-runner ./e2e/cmd/e2e
exec bin/e2e-runner "$@"
