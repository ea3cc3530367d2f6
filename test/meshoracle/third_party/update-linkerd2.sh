#!/bin/sh
# Copies Linkerd's injector from a linkerd2 git directory at a commit into
# linkerd2/: the files below, verbatim, and nothing else.
# Usage: update-linkerd2.sh GIT_DIR COMMIT
# Then update the commit in linkerd2/README.md and run `make test-meshes`.
set -eu
git_dir=$1 commit=$2
dest=$(dirname "$0")/linkerd2
files='LICENSE go.mod go.sum
pkg/inject/inject.go pkg/inject/report.go pkg/inject/uninject.go pkg/inject/annotation_patch.go
pkg/healthcheck/sidecar.go pkg/k8s/k8s.go pkg/k8s/labels.go
pkg/charts/charts.go pkg/charts/linkerd2/values.go
pkg/util/http.go pkg/util/parsing.go pkg/util/portrange.go
pkg/version/channels.go pkg/version/channelversion.go pkg/version/version.go
controller/gen/apis/externalworkload/register.go
controller/gen/apis/externalworkload/v1beta1/doc.go controller/gen/apis/externalworkload/v1beta1/register.go
controller/gen/apis/externalworkload/v1beta1/types.go controller/gen/apis/externalworkload/v1beta1/zz_generated.deepcopy.go
charts/templates.go charts/linkerd-control-plane/Chart.yaml charts/linkerd-control-plane/values.yaml
charts/linkerd-crds/Chart.yaml charts/linkerd-crds/values.yaml charts/linkerd2-cni/Chart.yaml
charts/partials charts/patch controller/proxy-injector/fake/data'
rm -rf "$dest" && mkdir -p "$dest"
# shellcheck disable=SC2086 # the list splits on purpose
git --git-dir "$git_dir" archive "$commit" $files | tar -x -C "$dest"
