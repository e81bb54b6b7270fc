#!/usr/bin/env bash
# The CustomResourceDefinitions of the Prometheus operator's ServiceMonitor
# and PrometheusRule, generated, as the operator's release does, from its
# API module (github.com/prometheus-operator/prometheus-operator/pkg/apis/
# monitoring) with controller-gen, both from the Go module proxy. Cached
# under $CDCLAKE_CACHE; prints the folder holding the two files.
#
# usage: infra/k8s/crds.sh
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir=$CDCLAKE_CACHE/crds-$PROM_OPERATOR_VERSION
out=$dir/out
files=("$out/monitoring.coreos.com_servicemonitors.yaml" "$out/monitoring.coreos.com_prometheusrules.yaml")
if [[ ! -f ${files[0]} || ! -f ${files[1]} ]]; then
  gen=$CDCLAKE_CACHE/tools/controller-gen-$CONTROLLER_TOOLS_VERSION
  if [[ ! -x $gen ]]; then
    mkdir -p "$CDCLAKE_CACHE/tools/gobin"
    GOBIN=$CDCLAKE_CACHE/tools/gobin GOFLAGS=-mod=mod go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
    mv "$CDCLAKE_CACHE/tools/gobin/controller-gen" "$gen"
  fi
  mkdir -p "$dir/mod"
  (
    cd "$dir/mod"
    export GOFLAGS=-mod=mod
    [[ -f go.mod ]] || go mod init crdgen >/dev/null 2>&1
    go get "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROM_OPERATOR_VERSION" >/dev/null 2>&1
    rm -rf "$out.tmp"
    "$gen" crd:crdVersions=v1,maxDescLen=0 \
      paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir="$out.tmp"
  )
  mkdir -p "$out"
  for f in "${files[@]}"; do
    cp "$out.tmp/$(basename "$f")" "$f"
  done
  rm -rf "$out.tmp"
  k8s_log "CRDs of the Prometheus operator $PROM_OPERATOR_VERSION in $out"
fi
echo "$out"
