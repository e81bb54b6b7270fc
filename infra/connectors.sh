#!/usr/bin/env bash
# Registers the Debezium connectors with Kafka Connect and waits until their
# tasks run (idempotent: PUT /connectors/NAME/config): three on PostgreSQL,
# one on MariaDB.
#
#   shop-schema  topics shop.*     JSON with schemas (key and value), transaction
#                                  metadata on (topic shop.transaction)
#   shop-raw     topics shopraw.*  JSON without schemas, heartbeats every 2 s
#                                  (topic __debezium-heartbeat.shopraw),
#                                  decimal.handling.mode=string: schemaless JSON
#                                  cannot carry a precise decimal's scale, a
#                                  catalog (testdata/e2e/shopraw-catalog.yaml)
#                                  types the text
#
# Both: plugin pgoutput, their own slot and publication (FOR ALL TABLES, so a
# table created later is captured), snapshot.mode=initial, logical decoding messages to <prefix>.message,
# skipped.operations=none (Debezium skips TRUNCATE events by default).
#
#   shop-avro    topics shopavro.* shop-schema's settings with Apicurio's Avro
#                                  converter (key and value): Confluent-framed
#                                  Avro (magic byte 0, 4-byte content id), the
#                                  schemas in the registry (infra/start.sh
#                                  registry), transaction metadata on
#
#   maria        topics maria.*    MariaDB database shop: JSON with schemas,
#                                  transaction metadata (maria.transaction),
#                                  schema changes (topic maria),
#                                  bigint.unsigned.handling.mode=precise
# Usage: infra/connectors.sh [--delete]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CONNECTOR_TIMEOUT=${CONNECTOR_TIMEOUT:-120}
NAMES=(shop-schema shop-avro shop-raw maria)

config() { # NAME PREFIX SCHEMAS EXTRA_JSON
  jq -n --arg prefix "$2" --arg slot "cdclake_${2}" --arg schemas "$3" \
    --arg host "$HOST" --arg port "$PG_PORT" --arg db "$PG_DB" --argjson extra "$4" '{
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "plugin.name": "pgoutput",
    "database.hostname": $host,
    "database.port": $port,
    "database.user": "postgres",
    "database.password": "unused-trust-auth",
    "database.dbname": $db,
    "topic.prefix": $prefix,
    "slot.name": $slot,
    "publication.name": ($slot + "_pub"),
    "publication.autocreate.mode": "all_tables",
    "schema.include.list": "public",
    "snapshot.mode": "initial",
    "decimal.handling.mode": "precise",
    "time.precision.mode": "adaptive",
    "binary.handling.mode": "bytes",
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": $schemas,
    "value.converter.schemas.enable": $schemas,
    "tombstones.on.delete": "true",
    "skipped.operations": "none",
    "topic.creation.default.replication.factor": "1",
    "topic.creation.default.partitions": "1"
  } + $extra'
}

maria_config() {
  jq -n --arg host "$HOST" --arg port "$MARIADB_PORT" --arg db "$MARIADB_DB" --arg bootstrap "$KAFKA_BOOTSTRAP" '{
    "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
    "tasks.max": "1",
    "database.hostname": $host,
    "database.port": $port,
    "database.user": "debezium",
    "database.password": "dbz",
    "database.server.id": "5401",
    "database.ssl.mode": "disable",
    "topic.prefix": "maria",
    "database.include.list": $db,
    "snapshot.mode": "initial",
    "bigint.unsigned.handling.mode": "precise",
    "decimal.handling.mode": "precise",
    "time.precision.mode": "adaptive_time_microseconds",
    "binary.handling.mode": "bytes",
    "include.schema.changes": "true",
    "provide.transaction.metadata": "true",
    "schema.history.internal.kafka.bootstrap.servers": $bootstrap,
    "schema.history.internal.kafka.topic": "_schema-history.maria",
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
    "tombstones.on.delete": "true",
    "topic.creation.default.replication.factor": "1",
    "topic.creation.default.partitions": "1"
  }'
}

put_connector() { # NAME JSON
  local code
  code=$(curl -sS --max-time 30 -o "$LOG_DIR/connector-$1.response" -w '%{http_code}' -X PUT \
    -H 'Content-Type: application/json' --data "$2" "$CONNECT_URL/connectors/$1/config") || true
  [[ $code == 200 || $code == 201 ]] || {
    cat "$LOG_DIR/connector-$1.response" >&2 || true
    die "Connect refused connector $1 (HTTP $code)"
  }
}

task_running() { # NAME
  local s
  s=$(curl -fsS --max-time 5 "$CONNECT_URL/connectors/$1/status") || return 1
  if jq -e '[.tasks[]?.state] | index("FAILED")' <<<"$s" >/dev/null; then
    jq -r '.tasks[] | select(.state == "FAILED") | .trace' <<<"$s" | head -n 30 >&2
    die "connector $1: task FAILED (log: $LOG_DIR/connect.log)"
  fi
  jq -e '.connector.state == "RUNNING" and ([.tasks[]?.state] | length > 0 and all(. == "RUNNING"))' <<<"$s" >/dev/null
}

need_cmd jq
need_cmd curl
curl -fsS --max-time 5 "$CONNECT_URL/" >/dev/null || die "Kafka Connect is not answering on $CONNECT_URL; run infra/start.sh"

if [[ ${1:-} == --delete ]]; then
  for n in "${NAMES[@]}"; do
    if curl -fsS -o /dev/null -X DELETE "$CONNECT_URL/connectors/$n" 2>/dev/null; then log "deleted connector $n"; fi
  done
  exit 0
fi

put_connector shop-schema "$(config shop-schema shop true '{
  "provide.transaction.metadata": "true"
}')"
# Apicurio's converter, as Confluent's writes: the id in the value, not in
# headers.
avro_converter() { # key|value
  jq -n --arg c "$1.converter" --arg url "$REGISTRY_URL/apis/registry/v2" '{
    ($c): "io.apicurio.registry.utils.converter.AvroConverter",
    ($c + ".apicurio.registry.url"): $url,
    ($c + ".apicurio.registry.auto-register"): "true",
    ($c + ".apicurio.registry.as-confluent"): "true",
    ($c + ".apicurio.registry.use-id"): "contentId",
    ($c + ".apicurio.registry.headers.enabled"): "false"
  }'
}
put_connector shop-avro "$(config shop-avro shopavro true "$(jq -n --argjson k "$(avro_converter key)" \
  --argjson v "$(avro_converter value)" '{"provide.transaction.metadata": "true"} + $k + $v')")"
put_connector shop-raw "$(config shop-raw shopraw false '{
  "heartbeat.interval.ms": "2000",
  "decimal.handling.mode": "string"
}')"
put_connector maria "$(maria_config)"
for n in "${NAMES[@]}"; do
  wait_until "connector $n running" "$CONNECTOR_TIMEOUT" "$LOG_DIR/connect.log" connect task_running "$n"
done
