#!/usr/bin/env bash
# Starts the services on 127.0.0.1 and waits until each is ready.
# Usage: infra/start.sh [postgres|mariadb|kafka|registry|connect|s3 ...] (default: all).
# A service that is already running is left alone, so this is re-runnable.
# Run infra/install.sh first (infra-up does both).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_dirs

PG_TIMEOUT=${PG_TIMEOUT:-60}
MARIADB_TIMEOUT=${MARIADB_TIMEOUT:-60}
KAFKA_TIMEOUT=${KAFKA_TIMEOUT:-90}
CONNECT_TIMEOUT=${CONNECT_TIMEOUT:-180}
S3_TIMEOUT=${S3_TIMEOUT:-30}
REGISTRY_TIMEOUT=${REGISTRY_TIMEOUT:-60}
ICEBERG_REST_TIMEOUT=${ICEBERG_REST_TIMEOUT:-60}

# ---------------------------------------------------------------- PostgreSQL
start_postgres() {
  local logf=$LOG_DIR/postgres.log
  [[ -x $PG_BIN/pg_ctl ]] || die "PostgreSQL $PG_MAJOR is not installed ($PG_BIN); run infra/install.sh postgres"
  if [[ -f $PG_DATA/postmaster.pid ]] && pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    head -n 1 "$PG_DATA/postmaster.pid" >"$(pidfile postgres)"
    log "postgres: already running on $HOST:$PG_PORT"
    return 0
  fi
  port_free_or_ours postgres "$PG_PORT"
  local owner=${USER:-$(id -un)}
  if [[ $EUID -eq 0 ]]; then
    owner=postgres
    # The cluster owner must reach the run folder.
    runuser -u postgres -- test -x "$CDCLAKE_RUN" ||
      die "user postgres cannot enter $CDCLAKE_RUN; choose a CDCLAKE_RUN outside private home folders"
  fi
  mkdir -p "$PG_DATA" "$PG_SOCKET_DIR"
  touch "$logf"
  chown "$owner" "$PG_DATA" "$PG_SOCKET_DIR" "$logf"
  chmod 700 "$PG_DATA"
  if [[ ! -f $PG_DATA/PG_VERSION ]]; then
    log "postgres: initdb $PG_DATA"
    pg_as_owner "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --no-locale \
      >>"$logf" 2>&1 || die "initdb failed (log: $logf)"
    cat >>"$PG_DATA/postgresql.conf" <<EOF

# ---- cdclake infra (infra/start.sh) ----
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
# A test cluster: durability is not needed, speed is.
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
# A half-hour offset, so that time zone handling is visible in the capture.
timezone = 'Asia/Kolkata'
log_timezone = 'UTC'
log_min_messages = warning
log_replication_commands = on
EOF
  fi
  log "postgres: starting on $HOST:$PG_PORT"
  pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$logf" -w -t "$PG_TIMEOUT" \
    -o "-c listen_addresses=$HOST -p $PG_PORT -c unix_socket_directories=$PG_SOCKET_DIR" start >/dev/null ||
    {
      tail -n 30 "$logf" >&2
      die "postgres did not start (log: $logf)"
    }
  head -n 1 "$PG_DATA/postmaster.pid" >"$(pidfile postgres)"
  wait_until "postgres on $HOST:$PG_PORT" "$PG_TIMEOUT" "$logf" postgres \
    "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT"
  if [[ -z $(psql -X -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'") ]]; then
    psql -X -q -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE $PG_DB"
    log "postgres: created database $PG_DB"
  fi
}

# ------------------------------------------------------------------- MariaDB
start_mariadb() {
  local logf=$LOG_DIR/mariadb.log conf=$CONF_DIR/mariadb.cnf
  [[ -x $MARIADB_BIN ]] || die "MariaDB is not installed ($MARIADB_BIN); run infra/install.sh mariadb"
  if running mariadb; then
    log "mariadb: already running on $HOST:$MARIADB_PORT"
    return 0
  fi
  port_free_or_ours mariadb "$MARIADB_PORT"
  mkdir -p "$MARIADB_DATA"
  # Debezium reads the binary log: row events with full images. The server
  # runs in UTC; its sql_mode allows zero dates, which the workload writes.
  cat >"$conf" <<EOF
[mariadbd]
user=$(id -un)
datadir=$MARIADB_DATA
socket=$MARIADB_SOCKET
pid-file=$CDCLAKE_RUN/mariadb.pid
log-error=$logf
bind-address=$HOST
port=$MARIADB_PORT
skip-name-resolve
server_id=1
log_bin=$MARIADB_DATA/mariadb-bin
binlog_format=ROW
binlog_row_image=FULL
binlog_expire_logs_seconds=86400
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
default_time_zone='+00:00'
sql_mode=''
# A test server: durability is not needed, speed is.
innodb_flush_log_at_trx_commit=0
sync_binlog=0
innodb_buffer_pool_size=128M
performance_schema=OFF
EOF
  if [[ ! -d $MARIADB_DATA/mysql ]]; then
    log "mariadb: mariadb-install-db $MARIADB_DATA"
    mariadb-install-db --no-defaults --datadir="$MARIADB_DATA" --user="$(id -un)" \
      --auth-root-authentication-method=normal --skip-test-db >>"$logf" 2>&1 ||
      die "mariadb-install-db failed (log: $logf)"
  fi
  log "mariadb: starting on $HOST:$MARIADB_PORT"
  start_bg mariadb "$logf" "$MARIADB_BIN" --defaults-file="$conf"
  wait_until "mariadb on $HOST:$MARIADB_PORT" "$MARIADB_TIMEOUT" "$logf" mariadb \
    mariadb-admin --no-defaults --socket="$MARIADB_SOCKET" -u root ping
  # The database and Debezium's user (the privileges its documentation lists).
  maria -e "CREATE DATABASE IF NOT EXISTS $MARIADB_DB CHARACTER SET utf8mb4;
    CREATE USER IF NOT EXISTS 'debezium'@'$HOST' IDENTIFIED BY 'dbz';
    GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'debezium'@'$HOST';"
}

# --------------------------------------------------------------------- Kafka
kafka_cluster_id() {
  local f=$DATA_DIR/kafka-cluster-id id
  if [[ ! -s $f ]]; then
    # A Kafka Uuid: 16 random bytes, base64url without padding, not starting with '-'.
    while :; do
      id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
      [[ $id != -* ]] && break
    done
    printf '%s\n' "$id" >"$f"
  fi
  cat "$f"
}

# kafka_tls generates, once, a CA and the broker's certificate for the
# SASL_SSL listener (PEM: key and chain in broker.pem, the CA in ca.pem).
kafka_tls() {
  [[ -f $KAFKA_TLS_DIR/broker.pem && -f $KAFKA_TLS_DIR/ca.pem ]] && return
  command -v openssl >/dev/null || die "openssl is needed for the Kafka SASL_SSL listener (apt-get install openssl)"
  local d=$KAFKA_TLS_DIR
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=cdclake test CA"
    openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=$HOST"
    printf 'subjectAltName=IP:%s,DNS:localhost\n' "$HOST" >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.crt -days 3650 -extfile broker.ext
    openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker.pk8
    cat broker.pk8 broker.crt >broker.pem
  ) >>"$LOG_DIR/kafka-tls.log" 2>&1 || die "generating the Kafka TLS certificates failed (log: $LOG_DIR/kafka-tls.log)"
}

start_kafka() {
  local logf=$LOG_DIR/kafka.log conf=$CONF_DIR/kafka/server.properties
  [[ -f $KAFKA_LIBS/.complete ]] || die "Kafka is not installed ($KAFKA_LIBS); run infra/install.sh kafka"
  if running kafka; then
    log "kafka: already running on $KAFKA_BOOTSTRAP"
    return 0
  fi
  port_free_or_ours kafka "$KAFKA_PORT"
  port_free_or_ours kafka "$KAFKA_CONTROLLER_PORT"
  port_free_or_ours kafka "$KAFKA_SASL_SSL_PORT"
  mkdir -p "$CONF_DIR/kafka" "$DATA_DIR/kafka"
  kafka_tls
  cat >"$conf" <<EOF
# KRaft, one node that is both controller and broker, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
# SASL_SSL: SCRAM users (created through the admin API, e.g. by the tests),
# TLS with a certificate for 127.0.0.1 signed by the CA in $KAFKA_TLS_DIR.
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$KAFKA_TLS_DIR/broker.pem
log.dirs=$DATA_DIR/kafka
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.network.threads=2
num.io.threads=4
log.retention.hours=-1
log.segment.bytes=67108864
EOF
  if [[ ! -f $DATA_DIR/kafka/meta.properties ]]; then
    log "kafka: formatting $DATA_DIR/kafka"
    kafka_tool kafka.tools.StorageTool format --ignore-formatted \
      -t "$(kafka_cluster_id)" -c "$conf" >>"$logf" 2>&1 || {
      tail -n 20 "$logf" >&2
      die "kafka storage format failed (log: $logf)"
    }
  fi
  log "kafka $KAFKA_VERSION: starting on $KAFKA_BOOTSTRAP"
  # shellcheck disable=SC2086
  start_bg kafka "$logf" "$(java_bin)" $KAFKA_HEAP_OPTS "${JVM_COMMON_OPTS[@]}" \
    -Dlog4j2.configurationFile="$INFRA_DIR/conf/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$conf"
}

kafka_started() { # the broker logs this line once it serves requests, after its last start
  port_open "$KAFKA_PORT" &&
    awk '/^==== kafka start /{s=0} /Kafka Server started/{s=1} END{exit !s}' "$LOG_DIR/kafka.log"
}

# ------------------------------------------------------------- Kafka Connect
start_connect() {
  local logf=$LOG_DIR/connect.log conf=$CONF_DIR/connect/connect-distributed.properties
  [[ -d $CONNECT_PLUGIN_PATH/debezium-connector-postgres && -d $CONNECT_PLUGIN_PATH/debezium-connector-mariadb ]] ||
    die "Debezium is not installed; run infra/install.sh debezium"
  if running connect; then
    log "connect: already running on $CONNECT_URL"
    return 0
  fi
  port_free_or_ours connect "$CONNECT_PORT"
  mkdir -p "$CONF_DIR/connect"
  cat >"$conf" <<EOF
# Kafka Connect, distributed mode, one worker, loopback only.
bootstrap.servers=$KAFKA_BOOTSTRAP
group.id=cdclake-connect
listeners=http://$HOST:$CONNECT_PORT
rest.advertised.host.name=$HOST
rest.advertised.port=$CONNECT_PORT
plugin.path=$CONNECT_PLUGIN_PATH
# Worker defaults; each connector sets its own converters (see connectors.sh).
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
config.storage.topic=_connect-configs
offset.storage.topic=_connect-offsets
status.storage.topic=_connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.storage.partitions=1
status.storage.partitions=1
offset.flush.interval.ms=1000
topic.creation.enable=true
# Every plugin on the path ships ServiceLoader manifests: no class scanning.
plugin.discovery=service_load
EOF
  log "connect $KAFKA_VERSION: starting on $CONNECT_URL"
  # shellcheck disable=SC2086
  start_bg connect "$logf" "$(java_bin)" $CONNECT_HEAP_OPTS "${JVM_COMMON_OPTS[@]}" \
    -Dlog4j2.configurationFile="$INFRA_DIR/conf/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" org.apache.kafka.connect.cli.ConnectDistributed "$conf"
}

connect_ready() { # both Debezium connectors and, once installed, the Avro converter
  local plugins
  plugins=$(curl -fsS --max-time 5 "$CONNECT_URL/connector-plugins?connectorsOnly=false") &&
    grep -q 'io.debezium.connector.postgresql.PostgresConnector' <<<"$plugins" &&
    grep -q 'io.debezium.connector.mariadb.MariaDbConnector' <<<"$plugins" &&
    { [[ ! -d $REGISTRY_CONVERTER_DIR ]] || grep -q 'io.apicurio.registry.utils.converter.AvroConverter' <<<"$plugins"; }
}

# -------------------------------------------------------- Apicurio Registry
start_registry() {
  local logf=$LOG_DIR/registry.log
  [[ -f $REGISTRY_HOME/.complete && -f $REGISTRY_HOME/quarkus-run.jar ]] ||
    die "Apicurio Registry is not installed ($REGISTRY_HOME); run infra/install.sh registry"
  if running registry; then
    log "registry: already running on $REGISTRY_URL"
    return 0
  fi
  port_free_or_ours registry "$REGISTRY_PORT"
  # Storage is H2 in memory: a restart starts with no schemas (and ids from
  # 1 again), so the topics written before no longer match it.
  log "apicurio-registry $APICURIO_REGISTRY_VERSION: starting on $REGISTRY_URL (in-memory storage)"
  # shellcheck disable=SC2086
  start_bg registry "$logf" "$(java_bin)" $REGISTRY_HEAP_OPTS "${JVM_COMMON_OPTS[@]}" \
    -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$REGISTRY_PORT" \
    -jar "$REGISTRY_HOME/quarkus-run.jar"
}

registry_ready() { curl -fsS -o /dev/null --max-time 2 "$REGISTRY_URL/apis/ccompat/v7/subjects"; }

# ------------------------------------------------------------ S3 (versitygw)
start_s3() {
  local logf=$LOG_DIR/versitygw.log dir=$DATA_DIR/s3
  [[ -x $VERSITYGW_BIN ]] || die "versitygw is not installed ($VERSITYGW_BIN); run infra/install.sh versitygw"
  if running versitygw; then
    log "versitygw: already running on $HOST:$S3_PORT"
    return 0
  fi
  port_free_or_ours versitygw "$S3_PORT"
  mkdir -p "$dir"
  log "versitygw $VERSITYGW_VERSION: starting on $HOST:$S3_PORT (posix $dir)"
  start_bg versitygw "$logf" "$VERSITYGW_BIN" --port "$HOST:$S3_PORT" --quiet --health /_health \
    --access "$S3_ACCESS_KEY" --secret "$S3_SECRET_KEY" --region us-east-1 posix "$dir"
}

s3_ready() { curl -fsS -o /dev/null --max-time 2 "http://$HOST:$S3_PORT/_health"; }

# s3_curl METHOD PATH: a SigV4-signed request to versitygw.
s3_curl() {
  local m=(-X "$1")
  [[ $1 == HEAD ]] && m=(--head)
  curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "${m[@]}" \
    -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" "http://$HOST:$S3_PORT$2" || true
}

create_buckets() {
  local b code
  for b in $S3_BUCKETS; do
    code=$(s3_curl HEAD "/$b")
    if [[ $code == 200 ]]; then continue; fi
    code=$(s3_curl PUT "/$b")
    [[ $code == 200 ]] || die "versitygw: creating bucket $b answered HTTP $code (log: $LOG_DIR/versitygw.log)"
    log "versitygw: created bucket $b"
  done
}

# ------------------------------------------------ Iceberg REST catalog
# Apache Iceberg's REST fixture (infra/iceberg-rest/RestCatalog.java) on a
# JDBC catalog in a SQLite file; the tables' metadata go where cdclake puts
# each table (its lake: a folder, or the infra's S3 server), other
# namespaces' under the warehouse folder.
start_iceberg_rest() {
  local logf=$LOG_DIR/iceberg-rest.log dir=$DATA_DIR/iceberg-rest
  [[ -f $ICEBERG_REST_LIBS/.complete && -f $ICEBERG_REST_LIBS/launcher/.complete ]] ||
    die "the Iceberg REST catalog is not installed ($ICEBERG_REST_LIBS); run infra/install.sh iceberg-rest"
  if running iceberg-rest; then
    log "iceberg-rest: already running on $ICEBERG_REST_URL"
    return 0
  fi
  port_free_or_ours iceberg-rest "$ICEBERG_REST_PORT"
  mkdir -p "$dir/warehouse"
  log "iceberg REST catalog $ICEBERG_REST_VERSION: starting on $ICEBERG_REST_URL (JDBC catalog $dir/catalog.db)"
  start_bg iceberg-rest "$logf" "$(java_bin)" -Xmx256m "${JVM_COMMON_OPTS[@]}" \
    -Dcdclake.s3.endpoint="http://$HOST:$S3_PORT" -Dcdclake.s3.access-key="$S3_ACCESS_KEY" -Dcdclake.s3.secret-key="$S3_SECRET_KEY" \
    -cp "$ICEBERG_REST_LIBS/*:$ICEBERG_REST_LIBS/launcher" RestCatalog "$HOST" "$ICEBERG_REST_PORT" "$dir/catalog.db" "$dir/warehouse"
}

iceberg_rest_ready() { curl -fsS -o /dev/null --max-time 2 "$ICEBERG_REST_URL/v1/config"; }

# ---------------------------------------------------------------------- main
services=("$@")
[[ ${#services[@]} -gt 0 ]] || services=(postgres mariadb kafka s3 registry connect)
want() { local s; for s in "${services[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
for s in "${services[@]}"; do
  case $s in postgres | mariadb | kafka | registry | connect | s3 | iceberg-rest) ;; *) die "unknown service $s (postgres mariadb kafka registry connect s3 iceberg-rest)" ;; esac
done

t0=$SECONDS
# Kafka, versitygw and the registry start in the background while PostgreSQL starts.
if want kafka; then start_kafka; fi
if want s3; then start_s3; fi
if want registry; then start_registry; fi
if want iceberg-rest; then start_iceberg_rest; fi
if want postgres; then start_postgres; fi
if want mariadb; then start_mariadb; fi
if want kafka; then
  wait_until "kafka on $KAFKA_BOOTSTRAP" "$KAFKA_TIMEOUT" "$LOG_DIR/kafka.log" kafka kafka_started
fi
if want s3; then
  wait_until "versitygw on $HOST:$S3_PORT" "$S3_TIMEOUT" "$LOG_DIR/versitygw.log" versitygw s3_ready
  create_buckets
fi
if want iceberg-rest; then
  wait_until "iceberg-rest on $ICEBERG_REST_URL (/v1/config)" "$ICEBERG_REST_TIMEOUT" "$LOG_DIR/iceberg-rest.log" iceberg-rest iceberg_rest_ready
fi
if want registry; then
  wait_until "registry on $REGISTRY_URL (/apis/ccompat/v7)" "$REGISTRY_TIMEOUT" "$LOG_DIR/registry.log" registry registry_ready
fi
if want connect; then
  running kafka || port_open "$KAFKA_PORT" || die "connect needs kafka; start it first"
  start_connect
  wait_until "connect on $CONNECT_URL (plugins loaded)" "$CONNECT_TIMEOUT" "$LOG_DIR/connect.log" connect connect_ready
fi
log "services up in $((SECONDS - t0))s; logs in $LOG_DIR"
