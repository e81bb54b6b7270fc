#!/usr/bin/env bash
# Starts the test cluster on 127.0.0.1, every daemon a plain process whose
# PID is kept in $K8S_WORK/run (no systemd here):
#
#   api    etcd and kube-apiserver: enough to validate manifests
#   node   and kube-controller-manager, kube-scheduler, containerd and
#          a kubelet: one node that runs hostNetwork pods
#
# The node: cgroup v1 with the cgroupfs driver; a loopback-only CNI
# network (only hostNetwork pods run: no Services, DNS or kube-proxy); the
# kubelet refuses a loopback node IP and registers the node without
# addresses, which are then patched in (InternalIP 127.0.0.1) so that logs
# and exec work. The kubelet rewrites vm.overcommit_memory, kernel.panic
# and kernel.panic_on_oops: their values are saved for down.sh, which
# always runs after (a trap in the callers).
#
# usage: infra/k8s/up.sh api|node   (after build.sh, tools.sh and certs.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
mode=${1:-node}
w=$K8S_WORK p=$K8S_WORK/pki run=$K8S_WORK/run logs=$K8S_WORK/logs
mkdir -p "$run" "$logs" "$w/etc"
t0=$SECONDS
start() { # NAME COMMAND...
  local name=$1
  shift
  nohup "$@" >"$logs/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
}
waitfor() { # SECONDS WHAT COMMAND...
  local n=$1 what=$2
  shift 2
  for _ in $(seq 1 $((n * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  k8s_log "timed out waiting for $what; the last log lines:"
  tail -n 20 "$logs"/*.log >&2
  return 1
}

start etcd etcd --name "$K8S_NODE" --data-dir "$w/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster "$K8S_NODE=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381
waitfor 30 etcd curl -fsS http://127.0.0.1:2379/health
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port=6443 \
  --etcd-servers=http://127.0.0.1:2379 \
  --client-ca-file="$p/ca.crt" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
  --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" --kubelet-client-key="$p/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
  --service-cluster-ip-range=10.96.0.0/28 --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction --endpoint-reconciler-type=none --profiling=false
waitfor 90 "the API server" "$KUBECTL" get --raw /readyz
k8s_log "API server ready after $((SECONDS - t0))s"
[[ $mode == api ]] && exit 0

# The node.
for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
  [[ -f $run/sysctl.orig ]] || echo "$k=$(sysctl -n "$k")"
done >>"$run/sysctl.orig.tmp"
[[ -f $run/sysctl.orig ]] || mv "$run/sysctl.orig.tmp" "$run/sysctl.orig"
rm -f "$run/sysctl.orig.tmp"
mkdir -p "$w/cni/net.d" "$w/kubelet" "$w/pod-logs" "$w/kubelet-plugins/volume/exec" "$w/containerd"
for f in containerd.toml kubelet-config.yaml; do sed "s#@WORK@#$w#g" "$here/conf/$f.in" >"$w/etc/$f"; done
cp "$here/conf/10-loopback.conflist" "$w/cni/net.d/"
printf 'nameserver 127.0.0.1\noptions ndots:1\n' >"$w/etc/resolv.conf"

start containerd containerd --config "$w/etc/containerd.toml"
waitfor 30 containerd ctr -a "$w/containerd.sock" version
for img in "$w"/images/*.oci.tar; do
  ctr -a "$w/containerd.sock" -n k8s.io images import "$img" >/dev/null
done
start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig="$p/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$p/controller-manager.kubeconfig" --authorization-kubeconfig="$p/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
  --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" --use-service-account-credentials=true \
  --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
  --service-cluster-ip-range=10.96.0.0/28 --profiling=false --flex-volume-plugin-dir="$w/kubelet-plugins/volume/exec"
start kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig="$p/scheduler.kubeconfig" \
  --authentication-kubeconfig="$p/scheduler.kubeconfig" --authorization-kubeconfig="$p/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false
start kubelet "$K8S_BIN/kubelet" --config="$w/etc/kubelet-config.yaml" --kubeconfig="$p/kubelet.kubeconfig" \
  --root-dir="$w/kubelet" --hostname-override="$K8S_NODE" --node-ip=127.0.0.1 --v=1
waitfor 90 "the node to register" "$KUBECTL" get node "$K8S_NODE"
"$KUBECTL" patch node "$K8S_NODE" --subresource=status --type=merge \
  -p '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"},{"type":"Hostname","address":"'"$K8S_NODE"'"}]}}' >/dev/null
"$KUBECTL" wait --for=condition=Ready "node/$K8S_NODE" --timeout=120s >/dev/null
waitfor 60 "the default service account" "$KUBECTL" get serviceaccount default -n default
k8s_log "node $K8S_NODE ready after $((SECONDS - t0))s"
