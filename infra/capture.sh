#!/usr/bin/env bash
# Captures every Debezium topic (both connectors, heartbeats, transaction
# metadata, logical decoding messages) from the beginning, once the workload's
# end marker has arrived on both connectors, with the real Kafka consumer
# (infra/capture/Capture.java).
#
# usage: infra/capture.sh [--fresh] [--rows N] OUT_DIR
#   --fresh   first: stop everything, purge the services' data, start them,
#             set up the workload, register the connectors and run the
#             workload (the large batch has N rows, default 20000); waits
#             for another e2e-real or --fresh capture on the machine to end
#   --stop    stop every service at the end (also on failure)
# Writes OUT_DIR/<topic>.ndjson (values), OUT_DIR/keys/<topic>.ndjson,
# OUT_DIR/_manifest.tsv and OUT_DIR/README.md (versions and settings).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CAPTURE_TIMEOUT=${CAPTURE_TIMEOUT:-300}
fresh=0
stop=0
rows=20000
out=
usage="usage: infra/capture.sh [--fresh] [--stop] [--rows N] OUT_DIR"
for a in "$@"; do
  if [[ $a == --fresh ]]; then
    # Purging and restarting: not while another e2e-real or capture runs.
    run_exclusive "$INFRA_DIR/capture.sh" "$@"
  fi
done
while [[ $# -gt 0 ]]; do
  case $1 in
  --fresh) fresh=1 ;;
  --stop) stop=1 ;;
  --rows) rows=$2; shift ;;
  -*) die "$usage" ;;
  *) out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || die "$usage"
if ((stop)); then trap '"$INFRA_DIR/stop.sh" || true' EXIT; fi

if ((fresh)); then
  "$INFRA_DIR/stop.sh" --purge
  "$INFRA_DIR/install.sh"
  "$INFRA_DIR/start.sh"
  "$INFRA_DIR/workload.sh" all "$rows"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "$CDCLAKE_RUN/capture.XXXXXX")
trap 'rm -rf "$tmp"; if ((stop)); then "$INFRA_DIR/stop.sh" || true; fi' EXIT
log "capture: reading the topics (waiting for the workload's end marker)"
t=$SECONDS
# shellcheck disable=SC2086
"$(java_bin)" -Xmx768m "${JVM_TOOL_OPTS[@]}" \
  -Dlog4j2.configurationFile="$INFRA_DIR/conf/log4j2-tools.properties" \
  -cp "$KAFKA_LIBS/*" "$INFRA_DIR/capture/Capture.java" \
  --bootstrap "$KAFKA_BOOTSTRAP" --include '(shop|shopraw|shopavro|maria)\..*|maria|__debezium-heartbeat\..*' \
  --base64 'shopavro\..*' \
  --await shop.message=workload-end --await shopraw.message=workload-end --await shopavro.message=workload-end \
  --await maria.shop.workload_end=workload-end \
  --timeout "$CAPTURE_TIMEOUT" --out "$tmp" >"$LOG_DIR/capture.log" 2>&1 || {
  cat "$LOG_DIR/capture.log" >&2
  die "capture failed (log: $LOG_DIR/capture.log)"
}
grep -E 'capture: [0-9]+ topics|holds' "$LOG_DIR/capture.log" >&2 || true

# Replace the previous capture (README.md is rewritten below).
rm -rf "$out/keys"
find "$out" -maxdepth 1 -type f \( -name '*.ndjson' -o -name '*.b64' -o -name '_manifest.tsv' -o -name '_postgres.json' \
  -o -name '_mariadb.json' -o -name '_connectors.json' -o -name '_schemas.json' \) -delete
mv "$tmp"/*.ndjson "$tmp"/*.b64 "$tmp/_manifest.tsv" "$out/"
mv "$tmp/keys" "$out/keys"
# The registry's answer for every schema id the Avro topics name, so that
# they can be landed without the registry (source.schema_registry.url: the
# file).
[[ -f $tmp/_schema_ids.txt ]] || die "capture: the Avro topics name no schema id"
schemas='{}'
while read -r id; do
  s=$(curl -fsS --max-time 10 "$REGISTRY_URL/apis/ccompat/v7/schemas/ids/$id") || die "capture: the registry has no schema $id"
  schemas=$(jq -c --arg id "$id" --argjson s "$s" '. + {($id): $s}' <<<"$schemas")
done <"$tmp/_schema_ids.txt"
jq -S . <<<"$schemas" >"$out/_schemas.json"

pg_version=$(psql_shop -tAc "SHOW server_version")
connector_config() { curl -fsS --max-time 5 "$CONNECT_URL/connectors/$1/config" | jq -S 'del(.name)'; }
# The connectors' settings by topic prefix: verify_real.py reads how each
# encoded its values (decimal.handling.mode, time.precision.mode).
jq -n -S --argjson shop "$(connector_config shop-schema)" --argjson shopraw "$(connector_config shop-raw)" \
  --argjson shopavro "$(connector_config shop-avro)" --argjson maria "$(connector_config maria)" \
  '{shop: $shop, shopraw: $shopraw, shopavro: $shopavro, maria: $maria}' >"$out/_connectors.json"
# PostgreSQL's tables, keys and final state, so the capture can be verified
# without services (infra/verify_real.py --pg-dump).
[[ -x $VPY ]] || die "the Python venv is missing ($VPY); run infra/install.sh python"
"$VPY" "$INFRA_DIR/verify_real.py" --pg "host=$HOST port=$PG_PORT user=postgres dbname=$PG_DB" --dump-pg "$out/_postgres.json"
"$VPY" "$INFRA_DIR/verify_mariadb.py" --socket "$MARIADB_SOCKET" --db "$MARIADB_DB" --save "$out/_mariadb.json"
maria_version=$(maria -N -e "SELECT VERSION()")
cat >"$out/README.md" <<EOF
# Real Debezium PostgreSQL and MariaDB capture

Captured by \`infra/capture.sh\` (\`make -f Makefile.infra infra-capture\`) on
$(date -u +%Y-%m-%d) from real services on 127.0.0.1. Regenerate it with the same
command; the values differ only in times, LSNs, transaction ids and the
number of heartbeats.

| component | version |
|---|---|
| Apache Kafka (KRaft, one node) and Kafka Connect (distributed, one worker) | $KAFKA_VERSION (Maven Central \`org.apache.kafka:kafka_$SCALA_BINARY\`, \`connect-runtime\`) |
| Debezium PostgreSQL connector | $DEBEZIUM_VERSION (\`io.debezium:debezium-connector-postgres\`), plugin \`pgoutput\` |
| PostgreSQL | $pg_version (Debian \`postgresql-$PG_MAJOR\`), \`wal_level=logical\`, server time zone Asia/Kolkata |
| Debezium MariaDB connector | $DEBEZIUM_MARIADB_VERSION (\`io.debezium:debezium-connector-mariadb\`) |
| MariaDB | $maria_version (Debian \`mariadb-server\`), \`binlog_format=ROW\`, \`binlog_row_image=FULL\`, server time zone UTC, \`sql_mode=''\` |
| JSON converter | \`org.apache.kafka.connect.json.JsonConverter\` $KAFKA_VERSION |
| Avro converter and registry | \`io.apicurio:apicurio-registry-utils-converter\` $APICURIO_CONVERTER_VERSION, Apicurio Registry $APICURIO_REGISTRY_VERSION (Confluent API \`/apis/ccompat/v7\`) |

## Files

- \`<topic>.ndjson\`: the topic's message **values**, one per line, read from
  the beginning to the end offsets with the Kafka consumer
  (\`infra/capture/Capture.java\`). A tombstone (null value) is an empty line.
  A topic with several partitions (\`*.public.events\`: 3) holds partition 0,
  then 1, then 2, each in offset order, so each key's changes keep their order.
- \`<topic>.b64\` (\`shopavro.*\`): the same for a topic of binary messages,
  one base64-encoded message per line (cdclake's file source reads them).
- \`keys/<topic>.ndjson\`, \`keys/<topic>.b64\`: the message **keys**, line for line.
- \`_schemas.json\`: the registry's schema for every id the Avro messages
  name (\`GET /schemas/ids/{id}\`), by id: cdclake's
  \`source.schema_registry.url\` may be this file.
- \`_connectors.json\`: both connectors' settings by topic prefix.
- \`_manifest.tsv\`: per topic partition, its first line in the file, message
  count and Kafka offsets.
- \`_postgres.json\`: PostgreSQL after the workload: each table's columns
  (type, numeric scale), primary key and rows in the canonical form of
  \`infra/verify_real.py\` (decimals as exact text, timestamps as integer
  microseconds since 1970, dates as days, floats as IEEE hex, bytes as
  base64), so that a lake landed from this capture can be checked against
  the database without running it.

Topics: \`shop.*\` come from connector \`shop-schema\` (JSON **with** schemas,
key and value; transaction metadata on: \`shop.transaction\`), \`shopraw.*\`
from \`shop-raw\` (JSON **without** schemas; heartbeats every 2 s:
\`__debezium-heartbeat.shopraw\`). \`<prefix>.message\` holds logical decoding
messages (\`pg_logical_emit_message\`, op \`m\`); the last one, \`workload-end\`,
marks the end of the workload. \`shopavro.*\` come from \`shop-avro\`, the
settings of \`shop-schema\` with the Apicurio Avro converter
(Confluent-framed Avro, key and value). The connectors read the same database, so
their table names (\`source.db.schema.table\` = \`shop.public.*\`) are the same:
land them into different lakes.

\`maria.shop.*\` come from connector \`maria\` on MariaDB's database \`shop\`
(JSON with schemas; transaction metadata: \`maria.transaction\`; schema
changes: topic \`maria\`); the row in \`maria.shop.workload_end\` marks the
end of its workload. \`_mariadb.json\` holds MariaDB's tables and rows after
the workload, in the canonical form of \`infra/verify_mariadb.py\`.

## Workload

\`infra/workload-setup.sql\` (schema and the rows of the initial snapshot, op
\`r\`) and \`infra/workload.sql\` with a large batch of $rows rows: every column
type of interest (\`all_types\`, REPLICA IDENTITY FULL), unchanged TOAST values
(\`customers\`, REPLICA IDENTITY DEFAULT: placeholders
\`__debezium_unavailable_value\` in text, bytea, text[] and jsonb), inserts,
updates, deletes, a primary-key update, a multi-table transaction, ADD COLUMN
and DROP COLUMN mid-stream, a table created mid-stream (\`audit_log\`) and
TRUNCATE, and values at the edges of their types (\`edge_values\`: NaN and
infinities, \`time 24:00:00\`, numeric NaN, infinite timestamps and dates,
years before 1 and after 9999, a 1000-digit numeric, a text equal to the
placeholder).

\`infra/mariadb-workload-setup.sql\` and \`infra/mariadb-workload.sql\` (a
large batch of $((rows / 4)) rows): every MariaDB type of interest
(\`all_types\`: BIGINT UNSIGNED up to 2^64-1, DECIMAL(65,30), DATETIME(6),
TIMESTAMP(6), zero dates, TIME(6) from -838:59:59 to 838:59:59, YEAR,
BIT(1/12/64), ENUM, SET, JSON, BLOB, BINARY, utf8mb4 text with 4-byte
characters), a primary-key update, a multi-table transaction, ALTER TABLE
ADD COLUMN (with a default) and DROP COLUMN mid-stream.

## Connector settings

shop-schema:

\`\`\`json
$(connector_config shop-schema)
\`\`\`

shop-raw:

\`\`\`json
$(connector_config shop-raw)
\`\`\`

shop-avro:

\`\`\`json
$(connector_config shop-avro)
\`\`\`

maria:

\`\`\`json
$(connector_config maria)
\`\`\`

Land it with cdclake (one lake per connector) and verify it, no services
needed (\`make -f Makefile.infra verify-capture\` does both):

\`\`\`sh
./bin/cdclake run --source 'testdata/debezium-real/shop.*.ndjson' --sink /tmp/lake-schema
./bin/cdclake run --source 'testdata/debezium-real/*shopraw*.ndjson' --sink /tmp/lake-raw
infra/.venv/bin/python infra/verify_real.py --capture testdata/debezium-real \\
  --pg-dump testdata/debezium-real/_postgres.json \\
  --lake shop=/tmp/lake-schema --lake shopraw=/tmp/lake-raw
printf 'source:\\n  schema_registry:\\n    url: testdata/debezium-real/_schemas.json\\n' >/tmp/avro.yaml
./bin/cdclake run --source 'testdata/debezium-real/shopavro.*.b64' --sink /tmp/lake-avro --config /tmp/avro.yaml
infra/.venv/bin/python infra/verify_avro.py --avro /tmp/lake-avro --json /tmp/lake-schema
./bin/cdclake run --source 'testdata/debezium-real/maria*.ndjson' --sink /tmp/lake-maria
infra/.venv/bin/python infra/verify_mariadb.py --capture testdata/debezium-real \\
  --dump testdata/debezium-real/_mariadb.json --lake /tmp/lake-maria
\`\`\`
EOF
size=$(du -sk "$out" | cut -f1)
log "capture: $(find "$out" -maxdepth 1 \( -name '*.ndjson' -o -name '*.b64' \) | wc -l) topics into $out (${size} KiB) in $((SECONDS - t))s"
