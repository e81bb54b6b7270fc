# Settings of the Kubernetes scripts (sourced). Everything the cluster
# writes lives under K8S_WORK, which must be short: containerd's socket
# path there must fit the 108 bytes of a unix socket name.
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CDCLAKE_CACHE=${CDCLAKE_CACHE:-$HOME/.cache/cdclake}
K8S_CACHE=$CDCLAKE_CACHE/k8s-$K8S_VERSION
K8S_BIN=$K8S_CACHE/bin
K8S_WORK=${K8S_WORK:-/tmp/cdclake-k8s}
K8S_NODE=${K8S_NODE:-k8snode}
# The Prometheus operator's API and the CRD generator (ServiceMonitor,
# PrometheusRule).
PROM_OPERATOR_VERSION=${PROM_OPERATOR_VERSION:-v0.95.2}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.23.0}
CRANE_VERSION=${CRANE_VERSION:-v0.22.1}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
KUBECTL=$K8S_BIN/kubectl
export KUBECONFIG=$K8S_WORK/pki/admin.kubeconfig
k8s_log() { printf '%s [k8s] %s\n' "$(date +%T)" "$*" >&2; }
