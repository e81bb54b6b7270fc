#!/usr/bin/env bash
# Proves the manifests of deploy/kubernetes on a real API server: etcd and
# kube-apiserver on loopback (up.sh api), the Prometheus operator's CRDs
# applied, then every kustomization applied with --dry-run=server
# --validate=strict (the server's own defaulting, validation and schemas,
# unknown fields refused), and every negative fixture of
# deploy/kubernetes/tests/invalid refused. The API server is stopped at
# the end, also on failure, unless K8S_KEEP=1 (a caller that goes on).
#
# usage: infra/k8s/validate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
deploy=$(cd "$here/../../deploy/kubernetes" && pwd)
"$here/build.sh" kube-apiserver kubectl
"$here/tools.sh" api
"$here/certs.sh"
if ! "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then
  [[ ${K8S_KEEP:-0} == 1 ]] || trap '"$here/down.sh"' EXIT
  "$here/up.sh" api
fi
crds=$("$here/crds.sh")
"$KUBECTL" apply --server-side -f "$crds" >/dev/null
"$KUBECTL" wait --for=condition=Established crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com \
  --timeout=60s >/dev/null
fail=0
checked=0
for k in "$deploy"/*/kustomization.yaml "$deploy"/workloads/*/kustomization.yaml; do
  d=$(dirname "$k")
  if out=$("$KUBECTL" apply -k "$d" --dry-run=server --validate=strict 2>&1); then
    checked=$((checked + 1))
    k8s_log "valid: ${d#"$deploy"/}: $(grep -c . <<<"$out") objects"
  else
    k8s_log "REFUSED: ${d#"$deploy"/}:"
    echo "$out" >&2
    fail=1
  fi
done
refused=0
# Each broken manifest says, in a "# expect:" line, what the server must
# answer: refused for that reason, not another.
for f in "$deploy"/tests/invalid/*.yaml; do
  want=$(sed -n 's/^# expect: //p' "$f")
  if out=$("$KUBECTL" apply -f "$f" --dry-run=server --validate=strict 2>&1); then
    k8s_log "ACCEPTED, but must be refused: $(basename "$f"): $out"
    fail=1
  elif [[ -z $want ]] || ! grep -qF -- "$want" <<<"$out"; then
    k8s_log "refused, but not for the reason its '# expect:' line gives ($want): $(basename "$f"): $out"
    fail=1
  else
    refused=$((refused + 1))
    k8s_log "refused as it must be: $(basename "$f"): $want"
  fi
done
((fail == 0)) || exit 1
k8s_log "the API server $K8S_VERSION takes all $checked kustomizations and refuses all $refused broken manifests"
