#!/usr/bin/env bash
# Prints each service's state and memory. Usage: infra/status.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_dirs
# rss/pss: the service's processes now (pss shares shared memory out, so
# PostgreSQL's shared buffers count once); peak: VmHWM of the main process.
printf '%-10s %-8s %-8s %8s %8s %8s  %s\n' service state pid rss_MiB pss_MiB peak_MiB address
row() { # NAME ADDRESS
  local name=$1 addr=$2 pid=- state=stopped rss=- pss=- peak=-
  if running "$name"; then
    pid=$(cat "$(pidfile "$name")")
    state=running
    rss=$(($(mem_kb Rss "$pid") / 1024))
    pss=$(($(mem_kb Pss "$pid") / 1024))
    peak=$(($(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status") / 1024))
  fi
  printf '%-10s %-8s %-8s %8s %8s %8s  %s\n' "$name" "$state" "$pid" "$rss" "$pss" "$peak" "$addr"
}
row postgres "postgresql://postgres@$HOST:$PG_PORT/$PG_DB"
row mariadb "mariadb://root@$HOST:$MARIADB_PORT/$MARIADB_DB"
row kafka "$KAFKA_BOOTSTRAP"
row connect "$CONNECT_URL"
row registry "$REGISTRY_URL/apis/ccompat/v7"
row versitygw "http://$HOST:$S3_PORT"
row iceberg-rest "$ICEBERG_REST_URL"
if running connect; then
  for c in $(curl -fsS --max-time 5 "$CONNECT_URL/connectors" | tr -d '[]"' | tr , ' '); do
    printf 'connector %-14s %s\n' "$c" "$(curl -fsS --max-time 5 "$CONNECT_URL/connectors/$c/status" | tr -d '\n' | cut -c1-200)"
  done
fi
