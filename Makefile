# graceguard: run `make help` for the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# vX.Y.Z at a tag, vX.Y.Z-N-g<sha> after one, v0.0.0-dev+<sha> without (hack/version.sh).
VERSION ?= $(shell hack/version.sh)
LDFLAGS := -s -w -X github.com/graceguard/graceguard/internal/version.Version=$(VERSION)
# Image tags cannot hold '+': build metadata becomes '_' (as Kubernetes' own images do).
IMG ?= registry.local/graceguard:$(subst +,_,$(VERSION))
FUZZTIME ?= 30s

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build the webhook and the kubectl plugin into bin/.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/webhook ./cmd/webhook
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-graceguard ./cmd/kubectl-graceguard

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: chart-docs-check generate-check ## Check formatting, go vet, nothing unreachable in pkg/ and cmd/ (deadcode), and that the chart README, the CRD and the deep-copy code are generated.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) -C test vet ./...
	$(GO) -C hack vet ./...
	$(MAKE) --no-print-directory deadcode

DEADCODE_VERSION ?= v0.41.0
DEADCODE := $(BIN)/tools/deadcode-$(DEADCODE_VERSION)/deadcode
$(DEADCODE):
	GOBIN=$(dir $@) GOWORK=off GOFLAGS= $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)

.PHONY: deadcode
deadcode: $(DEADCODE) ## Fail if anything in pkg/ or cmd/ is unreachable from the programs (cmd/, hack/, test/): test seams belong in export_test.go.
	@# The three modules (product, test/, hack/) in one throw-away workspace, so that the lab's programs count as callers.
	@work=$$(mktemp -d) && trap 'rm -rf "$$work"' EXIT && \
	printf 'go $(shell $(GO) mod edit -json | sed -n 's/.*"Go": "\(.*\)".*/\1/p')\n\nuse (\n\t$(CURDIR)\n\t$(CURDIR)/test\n\t$(CURDIR)/hack\n)\n' > "$$work/go.work" && \
	out=$$(GOWORK="$$work/go.work" $(DEADCODE) github.com/graceguard/graceguard/...) || exit 1; \
	dead=$$(printf '%s\n' "$$out" | grep -E '^(pkg|cmd)/' || true); \
	if [ -n "$$dead" ]; then echo "unreachable in pkg/ or cmd/ (delete it, or move a test seam to export_test.go):"; echo "$$dead"; exit 1; fi

.PHONY: golden
golden: ## Regenerate golden files after an intended change (review the diff!); make generate writes the generated docs.
	UPDATE_GOLDEN=1 $(GO) test ./pkg/mutate/ ./pkg/cli/ ./pkg/manifest/
	UPDATE_GOLDEN=1 $(GO) -C test test ./harness/chart/

.PHONY: differential
differential: ## Hold the working tree's decisions to BASE's (a refactor changes none): mutate, check and explain of both plugins on the repository's inputs and a generated corpus. BASE=REF [DIFF_ARGS=-ignore REGEXP]
	@test -n "$(BASE)" || { echo "make differential: set BASE to the git revision to compare with, e.g. BASE=HEAD~3"; exit 2; }
	$(GO) -C hack run ./differential -base $(BASE) $(DIFF_ARGS)

.PHONY: generate
generate: ## Regenerate what derives from Go: deep-copy code and CRD (controller-gen, pinned), the chart's profile table, proof whitelist and flag ranges (_generated.tpl), the tables of README and docs/.
	hack/generate.sh

.PHONY: generate-check
generate-check: ## Fail if anything make generate writes is stale.
	hack/generate.sh --check

.PHONY: manifests
manifests: ## Regenerate config/install.yaml (the chart's defaults, for kubectl apply -k config/).
	UPDATE_GOLDEN=1 $(GO) -C test test -count=1 ./harness/chart/ -run TestInstallManifestIsCurrent

##@ Testing

.PHONY: demo
demo: ## Run graceguard on a real kube-apiserver + etcd built on this machine, apply examples/, show the results.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) -C hack run ./demo $(DEMO_ARGS)

.PHONY: test
test: vet ## The first tier, every suite but the floods: unit, golden, handler, CLI, chart, envtest (real kube-apiserver, and cert-manager mode with cert-manager), fuzz seeds, the mesh oracle and the alert rules (promtool).
	$(GO) test -skip '$(HOSTILE_TESTS)' ./...
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" CERT_MANAGER_ASSETS="$$(hack/cert-manager-assets.sh)" $(GO) -C test test -skip '$(HOSTILE_TESTS)' ./...
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) -C hack test ./...
	$(MAKE) --no-print-directory test-meshes
	$(MAKE) --no-print-directory test-alerts

# The hostile-input tier: minutes of floods each, so not in the first
# tier; .ci/run runs it after make test.
HOSTILE_TESTS := ^(TestConnectionFloodsAreBoundedAndReviewsAnswered|TestTheWorstAttacksStayUnderTheLimit)$$

.PHONY: test-hostile
test-hostile: ## The second tier: 10,000 hostile connections of each kind against the server's caps (pkg/server), and the webhook binary in the chart's memory limit under the worst attacks beside a real kube-apiserver (test/security). ~6 min warm.
	@# A renamed test would match nothing and pass: each must be listed.
	$(GO) test -list '$(HOSTILE_TESTS)' ./pkg/server | grep -x TestConnectionFloodsAreBoundedAndReviewsAnswered >/dev/null
	$(GO) -C test test -list '$(HOSTILE_TESTS)' ./security | grep -x TestTheWorstAttacksStayUnderTheLimit >/dev/null
	$(GO) test -count=1 -run '$(HOSTILE_TESTS)' ./pkg/server
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) -C test test -count=1 -run '$(HOSTILE_TESTS)' ./security

.PHONY: test-alerts
test-alerts: ## promtool test rules on the chart's alerts (test/alerts; promtool from github.com/prometheus/prometheus v0.316.0, built once into bin/promtool-v0.316.0), and every alert and dashboard query parsed with Prometheus' parser against the metrics graceguard exports.
	test -x bin/promtool-v0.316.0 || (cd test/alerts && GOWORK=off $(GO) build -tags remove_all_sd -o ../../bin/promtool-v0.316.0 github.com/prometheus/prometheus/cmd/promtool)
	cd test/alerts && ../../bin/promtool-v0.316.0 check rules rules.yaml && ../../bin/promtool-v0.316.0 test rules rules_test.yaml
	cd test/alerts && GOWORK=off $(GO) test -count=1 ./...

.PHONY: test-meshes
test-meshes: ## Hold graceguard to Istio's and Linkerd's real injectors (test/meshoracle, its own module: minutes cold, ~30 s warm); prints the scenarios run per mesh and mode.
	cd test/meshoracle && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 -v ./... | grep -Ev '^=== RUN'

.PHONY: generate-standins
generate-standins: ## Regenerate internal/meshtest/testdata (what the real Istio and Linkerd injectors add to a canonical Pod, test/meshoracle), then check the stand-ins against them.
	cd test/meshoracle && UPDATE_STANDINS=1 GOWORK=off $(GO) test -count=1 -run '^TestStandIns$$' ./... && GOWORK=off $(GO) test -count=1 -run '^TestStandIns$$' ./...

.PHONY: bench
bench: ## Benchmark engine and handlers, the webhook under TLS load next to a no-op baseline, Pod creation through a real kube-apiserver, and the shutdown observer at 10,000 Pods; writes docs/benchmarks.{md,json,-latency.svg}.
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) -C test run ./bench/cmd/bench $(BENCH_ARGS)

SCALE ?= smoke
.PHONY: scale
scale: ## Scale harness (test/scale): kube-apiserver, controllers and scheduler with graceguard as the chart installs it, kwok (built once into bin/) simulating nodes and kubelets that shut Pods down, and the observer; SCALE=smoke (CI, minutes) or full (issue 23's size, about 90 minutes); writes docs/scale.{md,json} (SCALE_ARGS=-out DIR elsewhere).
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh kube-controller-manager kube-scheduler)" $(GO) -C test run ./scale/cmd/scale -scale=$(SCALE) $(SCALE_ARGS)

.PHONY: fuzz
fuzz: ## Fuzz the parsers, the mutation invariants (and their independence of the mesh injector's order), the webhook's review decode and its bounded reader, the webhook's and the plugin's decisions on generated Pods, the handlers' answer bounds, the proof that skips the Pod validating call, the native floors (validating and mutating) against the webhook's decisions and the plugin's text-preserving output (FUZZTIME each, default 30s).
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzParseDuration -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzBudgetGrace -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzParseAnnotation -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzRecommendCoversWhatWasSeen -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/mutate -run '^$$' -fuzz FuzzMutate -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/mutate -run '^$$' -fuzz FuzzMeshOrder -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/webhook -run '^$$' -fuzz FuzzReaderReadsLikeTheAPIMachinery -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/webhook -run '^$$' -fuzz FuzzWorkloadReaderReadsLikeThePodReader -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/webhook -run '^$$' -fuzz FuzzReviewDecodeLikeControllerRuntime -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/webhook -run '^$$' -fuzz FuzzGeneratedPodsDecideAlike -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/webhook -run '^$$' -fuzz FuzzHandlers -fuzztime $(FUZZTIME)
	$(GO) -C test test ./harness/chart -run '^$$' -fuzz FuzzProvenPodsPassValidation -fuzztime $(FUZZTIME)
	$(GO) -C test test ./harness/chart -run '^$$' -fuzz FuzzFloorAgreesWithValidate -fuzztime $(FUZZTIME)
	$(GO) -C test test ./harness/chart -run '^$$' -fuzz FuzzMutatingFloorAgreesWithTheWebhook -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/manifest -run '^$$' -fuzz FuzzRender -fuzztime $(FUZZTIME) -fuzzminimizetime 0

.PHONY: security-report
security-report: build ## Send the adversarial corpus through the handlers, then every attack class to bin/webhook in a memory cgroup at the chart's limit beside a real kube-apiserver (root, cgroup v1); write both tables into docs/security.md. GRACEGUARD_REPORT_ROUNDS, _CLASS_SECONDS and _CLASSES (a regexp) shorten it.
	GRACEGUARD_SECURITY_REPORT=$(CURDIR)/docs/security.md $(GO) test ./pkg/webhook -run '^TestAdversarialCorpus$$' -count=1
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" GRACEGUARD_BINARY_REPORT=$(CURDIR)/docs/security.md GRACEGUARD_WEBHOOK_BINARY=$(BIN)/webhook \
		$(GO) -C test test ./security -run '^TestBinaryUnderTheChartsMemoryLimit$$' -count=1 -v -timeout 4h

.PHONY: conns-report
conns-report: ## Flood a real webhook server with each kind of hostile connection, uncapped and capped, and write what it held (heap, stack, RSS per connection) into docs/security.md.
	GRACEGUARD_CONN_REPORT=$(CURDIR)/docs/security.md $(GO) test ./pkg/server -run '^TestConnectionReport$$' -count=1 -timeout 30m

.PHONY: cert-manager-assets
cert-manager-assets: ## Build or reuse cert-manager's controller and cainjector, and its CRDs (bin/cert-manager/<version>/).
	@hack/cert-manager-assets.sh

.PHONY: envtest-assets
envtest-assets: ## Build or reuse kube-apiserver and etcd for envtest (bin/k8s/<version>/).
	@hack/envtest-assets.sh

.PHONY: traefik
traefik: ## Build or reuse Traefik, e2e scenario 13's ingress controller, from the Go module proxy (bin/traefik-<version>; make e2e does it too).
	@hack/traefik.sh

.PHONY: argo-rollouts
argo-rollouts: ## Build or reuse Argo Rollouts' controller, e2e scenario 18's, from the Go module proxy (bin/argo-rollouts-<version>; make e2e does it too).
	@hack/argo-rollouts.sh

##@ Chart

.PHONY: chart-docs
chart-docs: ## Regenerate charts/graceguard/README.md from values.yaml (helm-docs v1.14.2).
	hack/chart-docs.sh

.PHONY: chart-docs-check
chart-docs-check: ## Fail if charts/graceguard/README.md is stale.
	hack/chart-docs.sh --check

##@ Local cluster (Linux, root; real kubelet + containerd, no Docker)

.PHONY: cluster-up
cluster-up: ## Start the local single-node cluster; prints the kubeconfig path.
	$(GO) -C hack run ./cluster up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and clean up everything it made (idempotent).
	$(GO) -C hack run ./cluster down

.PHONY: cluster-status
cluster-status: ## Show the local cluster's processes and whether the node is Ready.
	$(GO) -C hack run ./cluster status

.PHONY: e2e
e2e: ## End-to-end on the real node: cluster up, Helm install, seed lab, rollouts under load (through Traefik too), a node drain, the chart's alerts in a real Prometheus, teardown even on failure (root; ~15 min warm, ~30 min cold, plus make e2e-tools once). E2E_ARGS=-focus ... -keep
	hack/e2e.sh $(E2E_ARGS)

# What make e2e runs beside the node (hack/e2e.sh): the Prometheus server of
# the module test/alerts pins (promtool's), with Kubernetes service discovery
# only, and kube-state-metrics as hack/kube-state-metrics pins it. Built once
# each into bin/ under its version (cold: minutes each; `time make e2e-tools`).
PROMETHEUS_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" { print $$2; exit }' test/alerts/go.mod)
PROMETHEUS := $(BIN)/prometheus-$(PROMETHEUS_VERSION)
$(PROMETHEUS):
	cd test/alerts && GOWORK=off $(GO) mod download github.com/prometheus/prometheus && \
	v=$$(cat "$$(GOWORK=off $(GO) list -m -f '{{.Dir}}' github.com/prometheus/prometheus)/VERSION") && \
	GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=$$v" -o $@.tmp github.com/prometheus/prometheus/cmd/prometheus
	mv $@.tmp $@
KUBE_STATE_METRICS_VERSION := $(shell awk '{ sub(/^require /, "") } $$1 == "k8s.io/kube-state-metrics/v2" { print $$2; exit }' hack/kube-state-metrics/go.mod)
KUBE_STATE_METRICS := $(BIN)/kube-state-metrics-$(KUBE_STATE_METRICS_VERSION)
$(KUBE_STATE_METRICS):
	cd hack/kube-state-metrics && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=$(KUBE_STATE_METRICS_VERSION)" -o $@.tmp k8s.io/kube-state-metrics/v2
	mv $@.tmp $@

.PHONY: e2e-tools e2e-tools-env
e2e-tools: $(PROMETHEUS) $(KUBE_STATE_METRICS) ## Build (once) the Prometheus server and kube-state-metrics make e2e runs beside the node.
e2e-tools-env: # What hack/e2e.sh exports for the suite.
	@echo "export GG_E2E_PROMETHEUS=$(PROMETHEUS) GG_E2E_KUBE_STATE_METRICS=$(KUBE_STATE_METRICS)"

.PHONY: test-cluster
test-cluster: ## Smoke-test the local cluster harness (root; ~30 s warm, ~5 min cold).
	$(GO) -C test test -tags e2e ./harness/cluster/ -v -timeout 30m

##@ Packaging

CYCLONEDX_GOMOD_VERSION ?= v1.10.0
CYCLONEDX_GOMOD := $(BIN)/tools/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)/cyclonedx-gomod
$(CYCLONEDX_GOMOD):
	GOBIN=$(dir $@) GOWORK=off GOFLAGS= CGO_ENABLED=0 $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

.PHONY: dist
dist: $(CYCLONEDX_GOMOD) ## Release artifacts into dist/: plugin and webhook for linux/darwin (amd64, arm64) and windows/amd64 as archives, checksums, krew manifest, multi-arch OCI image (no Docker), the packaged chart, CycloneDX SBOMs, signatures.
	$(GO) -C hack run ./dist -version $(VERSION) -out dist -cyclonedx-gomod $(CYCLONEDX_GOMOD)

.PHONY: dist-check
dist-check: ## Check dist/: checksums, each binary's platform and version, krew's own validation and install of every platform, image-oci reproduces the release image, SBOMs, signatures (and a flipped byte fails them), chart and image pushed to a local OCI registry and pulled back.
	$(GO) -C test test -tags dist ./dist/ -count=1 -v

.PHONY: image-oci
image-oci: ## Build the webhook's multi-arch (linux/amd64, linux/arm64) OCI image without Docker into dist/image/ (what make e2e installs).
	$(GO) -C hack run ./dist -version $(VERSION) -image-only -out dist/image

.PHONY: image
image: ## Build the same image from the Dockerfile with a Docker engine (none on the dev VMs; make image-oci needs none).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .
