# graceguard: run `make help` for the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/graceguard/graceguard/pkg/cli.Version=$(VERSION)
IMG ?= registry.local/graceguard:$(VERSION)
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
vet: ## Check formatting and run go vet.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

.PHONY: golden
golden: ## Regenerate golden files after an intended change (review the diff!).
	UPDATE_GOLDEN=1 $(GO) test ./pkg/mutate/ ./pkg/cli/

##@ Testing

.PHONY: test
test: vet ## Run every test: unit, golden, handler, CLI and fuzz seeds.
	$(GO) test ./...

.PHONY: fuzz
fuzz: ## Fuzz the parsers and the mutation invariants (FUZZTIME each, default 30s).
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzParseDuration -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/budget -run '^$$' -fuzz FuzzBudgetGrace -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/mutate -run '^$$' -fuzz FuzzMutate -fuzztime $(FUZZTIME)

.PHONY: envtest-assets
envtest-assets: ## Build or reuse kube-apiserver and etcd for envtest (bin/k8s/<version>/).
	@hack/envtest-assets.sh

##@ Packaging

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .
