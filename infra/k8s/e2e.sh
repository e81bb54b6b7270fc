#!/usr/bin/env bash
# make k8s-e2e: cdclake as pods on a real single-node Kubernetes on
# loopback, against the real broker and S3 server of infra/.
#
#   1. the Kubernetes binaries (build.sh, cached), containerd, runc, etcd
#      (tools.sh), the PKI (certs.sh);
#   2. the images: cdclake's (make image, tagged e2e) and the node's pause
#      image, both built without a container engine;
#   3. Kafka and the S3 server of infra/ (started if they are not);
#   4. the cluster (up.sh node), then validate.sh on its API server;
#   5. TestKubernetes (cmd/cdclake): the StatefulSet of deploy/kubernetes/e2e
#      lands a topic of the real capture, a pod is deleted mid-landing, the
#      replicas go 2 → 1, a Job from the CronJob drains what came since, and
#      DuckDB finds every row once in the lake;
#   6. the cluster torn down (down.sh, also on failure), and the services of
#      infra/ stopped if this script started them.
#
# usage: infra/k8s/e2e.sh    K8S_KEEP=1 leaves the cluster up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/env.sh"
source "$repo/infra/lib.sh"
t0=$SECONDS
declare -a timings=()
step() { # NAME COMMAND...
  local name=$1 t=$SECONDS rc=0
  shift
  k8s_log "---- $name"
  "$@" || rc=$?
  timings+=("$(printf '%-32s %5ss%s' "$name" $((SECONDS - t)) "$( ((rc == 0)) || echo "  (failed: $rc)")")")
  return $rc
}
started_services=()
finish() {
  local rc=$?
  if [[ ${K8S_KEEP:-0} != 1 ]]; then
    "$here/down.sh"
    ((${#started_services[@]})) && "$repo/infra/stop.sh" "${started_services[@]}" >/dev/null 2>&1
  fi
  printf '\n== k8s-e2e timings ==\n%s\ntotal %ss\n' "$(printf '%s\n' "${timings[@]}")" $((SECONDS - t0)) >&2
  exit "$rc"
}
trap finish EXIT

step "kubernetes binaries" "$here/build.sh"
step "containerd, runc, etcd" "$here/tools.sh" node
step "certificates" "$here/certs.sh"
images() {
  mkdir -p "$K8S_WORK/images"
  VERSION=e2e "$repo/infra/image/build.sh" "$K8S_WORK/images/cdclake.oci.tar" docker.io/cdclake/cdclake:e2e >/dev/null
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$K8S_WORK/images/pause" ./infra/k8s/pause)
  BINARY=$K8S_WORK/images/pause ENTRYPOINT=/pause "$repo/infra/image/build.sh" "$K8S_WORK/images/pause.oci.tar" \
    docker.io/cdclake/pause:1 >/dev/null
  rm -f "$K8S_WORK/images/pause"
}
step "images" images
services() {
  local s
  "$repo/infra/install.sh" kafka versitygw python >/dev/null
  for s in kafka s3; do
    if ! "$repo/infra/status.sh" 2>/dev/null | grep -Eq "^(${s/s3/versitygw}) +running"; then
      started_services+=("$s")
    fi
  done
  "$repo/infra/start.sh" kafka s3 >/dev/null
}
step "kafka and the S3 server" services
step "cluster up" "$here/up.sh" node
step "manifests on the API server" env K8S_KEEP=1 "$here/validate.sh"
s3_url=$(printf 's3://scratch?endpoint=http://%s:%s&use_path_style=true&disable_https=true&region=us-east-1' "$HOST" "$S3_PORT")
kubernetes_test() {
  (cd "$repo" && CDCLAKE_TEST_K8S_KUBECTL=$KUBECTL KUBECONFIG=$KUBECONFIG CDCLAKE_TEST_KAFKA_BROKERS=$KAFKA_BOOTSTRAP \
    CDCLAKE_TEST_S3_URL="$s3_url" CDCLAKE_TEST_S3_DIR="$DATA_DIR/s3/scratch" CDCLAKE_TEST_PYTHON="$VPY" \
    AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=us-east-1 \
    go test -count=1 -timeout 20m -v -run '^TestKubernetes$' ./cmd/cdclake/ 2>&1 | tee "$K8S_WORK/logs/test.log" |
    grep -E '^(=== RUN|--- |PASS|FAIL|ok)|k8s_test.go')
  grep -q -- '--- PASS: TestKubernetes ' "$K8S_WORK/logs/test.log"
}
step "cdclake as pods" kubernetes_test
