#!/usr/bin/env bash
# Builds the Kubernetes binaries the tests need from the Go module proxy,
# once: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kubectl of K8S_VERSION, into $CDCLAKE_CACHE/k8s-$K8S_VERSION/bin (kept
# between runs; a second call returns at once).
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# points its staging modules (k8s.io/api, client-go, …) at folders of its
# own repository. A scratch module requires it and replaces each of those
# by the published module of the matching v0 version, then `go build`s the
# commands with the version stamped in as the release build does.
#
# usage: infra/k8s/build.sh [COMMAND ...]   (default: all five)
# Cold: about 9 minutes on 2 cores, 2.7 GB peak memory, 4 GB of build cache.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cmds=("$@")
((${#cmds[@]})) || cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
mkdir -p "$K8S_BIN"
missing=()
for c in "${cmds[@]}"; do [[ -x $K8S_BIN/$c ]] || missing+=("$c"); done
((${#missing[@]})) || exit 0

mod=$K8S_CACHE/module
mkdir -p "$mod"
if [[ ! -f $mod/go.sum ]]; then
  k8s_log "kubernetes $K8S_VERSION: a scratch module requiring k8s.io/kubernetes"
  (
    cd "$mod"
    export GOFLAGS=-mod=mod
    go mod download "k8s.io/kubernetes@$K8S_VERSION"
    kgomod=$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/go.mod
    staging=${K8S_VERSION/#v1./v0.}
    rm -f go.mod go.sum
    go mod init k8sbuild >/dev/null 2>&1
    {
      printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
      grep -E '=> \./staging/src/' "$kgomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
      printf ')\n'
    } >>go.mod
    cat >tools.go <<'GO'
//go:build tools

// Package tools records the commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    go mod tidy -e >/dev/null 2>&1 || true
    [[ -s go.sum ]] || { echo "k8s: go mod tidy wrote no go.sum" >&2; exit 1; }
  )
fi
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
for c in "${missing[@]}"; do
  start=$SECONDS
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$K8S_BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c")
  mv "$K8S_BIN/$c.tmp" "$K8S_BIN/$c"
  k8s_log "built $c $K8S_VERSION in $((SECONDS - start))s"
done
