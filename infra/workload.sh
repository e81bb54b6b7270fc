#!/usr/bin/env bash
# The PostgreSQL and MariaDB workloads.
#   infra/workload.sh setup          schema + snapshot rows (workload-setup.sql,
#                                    mariadb-workload-setup.sql) and the
#                                    three-partition topics for `events`
#   infra/workload.sh run [ROWS]     the streamed changes (workload.sql,
#                                    mariadb-workload.sql); ROWS is the size of
#                                    PostgreSQL's large batch (default 20000),
#                                    MariaDB's is a quarter of it
#   infra/workload.sh all [ROWS]     setup, connectors, wait for streaming, run
set -euo pipefail
source "$(dirname "$0")/lib.sh"

STREAM_TIMEOUT=${STREAM_TIMEOUT:-120}

setup() {
  if [[ -n $(psql_shop -tAc "SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = 'all_types'") ]]; then
    die "database $PG_DB already holds the workload; start from a clean state with infra/stop.sh --purge"
  fi
  log "workload: setup (schema and snapshot rows)"
  psql_shop -q -f "$INFRA_DIR/workload-setup.sql" >/dev/null
  maria "$MARIADB_DB" <"$INFRA_DIR/mariadb-workload-setup.sql"
  # The large batch's topics get three partitions (Debezium partitions by key).
  local t
  for t in shop.public.events shopraw.public.events; do
    kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" \
      --create --if-not-exists --topic "$t" --partitions 3 --replication-factor 1 >/dev/null
  done
  log "workload: topics shop.public.events and shopraw.public.events have 3 partitions"
}

# streaming SLOT: the connector's replication slot is active, i.e. the snapshot
# is over and the task streams from the slot.
streaming() {
  [[ $(psql_shop -tAc "SELECT active FROM pg_replication_slots WHERE slot_name = '$1'") == t ]]
}

# maria_streaming: the MariaDB connector reads the binary log (its snapshot
# is over).
maria_streaming() {
  [[ -n $(maria -N -e "SELECT 1 FROM information_schema.PROCESSLIST WHERE USER = 'debezium' AND COMMAND LIKE 'Binlog Dump%'") ]]
}

wait_streaming() {
  local s
  for s in cdclake_shop cdclake_shopraw; do
    wait_until "slot $s streaming" "$STREAM_TIMEOUT" "$LOG_DIR/connect.log" connect streaming "$s"
  done
  wait_until "mariadb connector streaming" "$STREAM_TIMEOUT" "$LOG_DIR/connect.log" connect maria_streaming
}

run() {
  local rows=${1:-20000}
  log "workload: run (large batch of $rows rows)"
  local t=$SECONDS
  psql_shop -q -v batch_rows="$rows" -f "$INFRA_DIR/workload.sql" >"$LOG_DIR/workload.out"
  { echo "SET @batch_rows = $((rows / 4));"; cat "$INFRA_DIR/mariadb-workload.sql"; } |
    maria "$MARIADB_DB" >>"$LOG_DIR/workload.out"
  log "workload: done in $((SECONDS - t))s"
}

case ${1:-} in
setup) setup ;;
run) run "${2:-20000}" ;;
all)
  setup
  "$INFRA_DIR/connectors.sh"
  wait_streaming
  run "${2:-20000}"
  ;;
*) die "usage: infra/workload.sh setup | run [ROWS] | all [ROWS]" ;;
esac
