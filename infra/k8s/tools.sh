#!/usr/bin/env bash
# Installs what the Kubernetes tests need besides the binaries of
# build.sh: etcd (Debian's etcd-server) for the API server, and for a node
# containerd, runc and the CNI plugins (Debian), and crictl (Go proxy).
#
# usage: infra/k8s/tools.sh api|node
set -euo pipefail
source "$(dirname "$0")/env.sh"
mode=${1:-node}
pkgs=(etcd-server openssl curl)
[[ $mode == node ]] && pkgs+=(containerd runc containernetworking-plugins)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  k8s_log "apt-get install ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ $mode == node && ! -x $CDCLAKE_CACHE/tools/crictl-$CRICTL_VERSION ]]; then
  mkdir -p "$CDCLAKE_CACHE/tools/gobin"
  GOBIN=$CDCLAKE_CACHE/tools/gobin GOFLAGS=-mod=mod go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  mv "$CDCLAKE_CACHE/tools/gobin/crictl" "$CDCLAKE_CACHE/tools/crictl-$CRICTL_VERSION"
fi
