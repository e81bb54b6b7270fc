#!/usr/bin/env bash
# Stops what up.sh started, by PID, and undoes what the kubelet did to
# the host: pods are deleted while the control plane still runs (their
# containers stop gracefully), leftover sandboxes removed through CRI,
# mounts under $K8S_WORK unmounted, the kubepods cgroups removed, the
# sysctls restored, the files the kubelet and containerd leave outside
# $K8S_WORK removed. Safe to run twice, or after a failed up.sh.
#
# usage: infra/k8s/down.sh [--purge]   (--purge also deletes $K8S_WORK)
set -uo pipefail
source "$(dirname "$0")/env.sh"
w=$K8S_WORK run=$K8S_WORK/run
alive() { [[ -f $run/$1.pid ]] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }
stop() { # NAME [SECONDS]
  local f=$run/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 $((${2:-20} * 4))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$f"
}
if alive kube-apiserver && alive kubelet; then
  for ns in $("$KUBECTL" get ns -o name 2>/dev/null | sed 's|namespace/||' | grep -v '^kube-'); do
    "$KUBECTL" delete statefulset,deployment,cronjob,job,pod --all -n "$ns" --wait=true --timeout=60s >/dev/null 2>&1
  done
fi
stop kubelet
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
if alive containerd && [[ -x $CDCLAKE_CACHE/tools/crictl-$CRICTL_VERSION ]]; then
  "$CDCLAKE_CACHE/tools/crictl-$CRICTL_VERSION" --runtime-endpoint "unix://$w/containerd.sock" --timeout 30s rmp -fa >/dev/null 2>&1
fi
stop containerd
stop etcd
# Leftovers of containerd's shims, which outlive it when sandboxes were
# not removed.
pkill -f "containerd-shim-runc-v2 -namespace k8s.io -address $w/containerd.sock" 2>/dev/null
mount | awk -v w="$w" 'index($3, w) == 1 {print $3}' | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m"
done
for c in /sys/fs/cgroup/*/kubepods; do
  [[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
done
if [[ -f $run/sysctl.orig ]]; then
  while IFS== read -r k v; do
    [[ $(sysctl -n "$k" 2>/dev/null) == "$v" ]] || sysctl -qw "$k=$v"
  done <"$run/sysctl.orig"
  rm -f "$run/sysctl.orig"
fi
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
[[ -d /var/log/containers ]] && find /var/log/containers -maxdepth 1 -type l -lname "$w/*" -delete
for d in /var/lib/kubelet/device-plugins /var/lib/kubelet /var/log/containers /run/containerd/runc/k8s.io /run/containerd/runc \
  /run/containerd/s /run/containerd; do
  [[ -d $d ]] && rmdir "$d" 2>/dev/null
done
if [[ ${1:-} == --purge ]]; then
  rm -rf "$w"
fi
true
