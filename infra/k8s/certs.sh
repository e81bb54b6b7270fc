#!/usr/bin/env bash
# The cluster's PKI under $K8S_WORK/pki (openssl; RSA 2048, ten years): a
# CA; the API server's serving certificate (127.0.0.1); client
# certificates for the admin, the API server towards the kubelet, the
# controller manager, the scheduler and the kubelet; the kubelet's serving
# certificate; the service-account key pair; and a kubeconfig per client.
# Made once: an existing pki/ is kept.
set -euo pipefail
source "$(dirname "$0")/env.sh"
p=$K8S_WORK/pki
[[ -f $p/admin.kubeconfig ]] && exit 0
mkdir -p "$p"
cd "$p"
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -nodes -key ca.key -subj "/CN=cdclake-k8s-ca" -days 3650 -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
# cert NAME SUBJECT [SAN] [EXTENDED_KEY_USAGE]
cert() {
  local n=$1 subj=$2 san=${3:-} eku=${4:-clientAuth}
  openssl genrsa -out "$n.key" 2048 2>/dev/null
  openssl req -new -key "$n.key" -subj "$subj" -out "$n.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$n.ext"
  openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
}
cert apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" serverAuth
cert admin "/O=system:masters/CN=cdclake-admin"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kubelet "/O=system:nodes/CN=system:node:$K8S_NODE"
cert kubelet-serving "/CN=$K8S_NODE" "IP:127.0.0.1,DNS:localhost,DNS:$K8S_NODE" serverAuth
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
chmod 600 ./*.key
for n in admin controller-manager scheduler kubelet; do
  cat >"$n.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
  - name: local
    cluster:
      certificate-authority: $p/ca.crt
      server: https://127.0.0.1:6443
users:
  - name: $n
    user:
      client-certificate: $p/$n.crt
      client-key: $p/$n.key
contexts:
  - name: local
    context: {cluster: local, user: $n}
current-context: local
KC
done
k8s_log "certificates in $p"
