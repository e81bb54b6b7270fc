# shellcheck shell=bash source-path=SCRIPTDIR
# shellcheck disable=SC2034 # the settings are used by the scripts that source this
# Shared settings and helpers for the infra/ scripts. Source it; do not run it.
#
# Everything listens on 127.0.0.1 only. Downloads live in $CDCLAKE_CACHE and
# are reused; state, configs, pids and logs live in $CDCLAKE_RUN.

INFRA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$INFRA_DIR/.." && pwd)
source "$INFRA_DIR/versions.env"

CDCLAKE_CACHE=${CDCLAKE_CACHE:-$HOME/.cache/cdclake}
CDCLAKE_RUN=${CDCLAKE_RUN:-/tmp/cdclake-infra}
LOG_DIR=$CDCLAKE_RUN/logs
DATA_DIR=$CDCLAKE_RUN/data
PID_DIR=$CDCLAKE_RUN/pids
CONF_DIR=$CDCLAKE_RUN/conf

HOST=127.0.0.1
KAFKA_PORT=${KAFKA_PORT:-59092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-59093}
CONNECT_PORT=${CONNECT_PORT:-58083}
PG_PORT=${PG_PORT:-55432}
PG_DB=${PG_DB:-shop}
MARIADB_PORT=${MARIADB_PORT:-53306}
MARIADB_DB=${MARIADB_DB:-shop}
S3_PORT=${S3_PORT:-57070}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-cdclake}
S3_SECRET_KEY=${S3_SECRET_KEY:-cdclake-secret-key}
S3_BUCKETS=${S3_BUCKETS:-lake lake-raw lake-catalog lake-maria lake-avro scratch}
# Apicurio Registry: its Confluent-compatible API is $REGISTRY_URL/apis/ccompat/v7,
# its own $REGISTRY_URL/apis/registry/v2 (what the Avro converter talks to).
REGISTRY_PORT=${REGISTRY_PORT:-58081}
ICEBERG_REST_PORT=${ICEBERG_REST_PORT:-58181}

KAFKA_BOOTSTRAP=$HOST:$KAFKA_PORT
# A second listener, SASL_SSL (SCRAM-SHA-256/512) with a certificate of a CA
# that start.sh generates: $KAFKA_TLS_DIR/ca.pem.
KAFKA_SASL_SSL_PORT=${KAFKA_SASL_SSL_PORT:-59094}
KAFKA_TLS_DIR=$CDCLAKE_RUN/conf/kafka/tls
# e2e-real and infra-capture purge, restart and stop the services: one at a
# time per machine (the ports are the machine's), a second run waits.
INFRA_LOCK=${INFRA_LOCK:-${TMPDIR:-/tmp}/cdclake-infra-$KAFKA_PORT.lock}
INFRA_LOCK_WAIT=${INFRA_LOCK_WAIT:-3600}
CONNECT_URL=http://$HOST:$CONNECT_PORT
REGISTRY_URL=http://$HOST:$REGISTRY_PORT

# JVM heaps: the machine has 2 cores and 24 GiB; keep every JVM modest.
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
CONNECT_HEAP_OPTS=${CONNECT_HEAP_OPTS:--Xms256m -Xmx512m}
REGISTRY_HEAP_OPTS=${REGISTRY_HEAP_OPTS:--Xms64m -Xmx256m}
TOOLS_HEAP_OPTS=${TOOLS_HEAP_OPTS:--Xmx256m}
JVM_COMMON_OPTS=(-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true)
# Short-lived tools start faster with the C1 compiler only.
JVM_TOOL_OPTS=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.awt.headless=true)

# Where each download goes (all under the cache, so a second run reuses it).
M2_REPO=$CDCLAKE_CACHE/m2
KAFKA_HOME=$CDCLAKE_CACHE/kafka_$SCALA_BINARY-$KAFKA_VERSION
KAFKA_LIBS=$KAFKA_HOME/libs
CONNECT_PLUGIN_PATH=$CDCLAKE_CACHE/connect-plugins-debezium-$DEBEZIUM_VERSION
# The Apicurio Avro converter: a plugin folder of its own on Connect's path.
REGISTRY_CONVERTER_DIR=$CONNECT_PLUGIN_PATH/apicurio-registry-converter
# The registry's Quarkus application (quarkus-run.jar and its lib/).
REGISTRY_HOME=$CDCLAKE_CACHE/apicurio-registry-$APICURIO_REGISTRY_VERSION
VERSITYGW_BIN=$CDCLAKE_CACHE/versitygw-$VERSITYGW_VERSION/versitygw
VENV=${CDCLAKE_INFRA_VENV:-$INFRA_DIR/.venv}
VPY=$VENV/bin/python
# pyspark for Iceberg's Spark runtime, and its jars (install.sh iceberg-spark).
ICEBERG_SPARK_VENV=$INFRA_DIR/.venv-iceberg-spark
ICEBERG_SPARK_JARS=$CDCLAKE_CACHE/iceberg-spark-$ICEBERG_VERSION
# Iceberg's REST catalog (install.sh iceberg-rest): its jars, and the
# launcher that serves it on $HOST only.
ICEBERG_REST_LIBS=$CDCLAKE_CACHE/iceberg-rest-$ICEBERG_REST_VERSION
ICEBERG_REST_URL=http://$HOST:$ICEBERG_REST_PORT
PG_BIN=${PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
PG_DATA=$DATA_DIR/postgres
PG_SOCKET_DIR=$CDCLAKE_RUN/pgsock
MARIADB_BIN=${MARIADB_BIN:-/usr/sbin/mariadbd}
MARIADB_DATA=$DATA_DIR/mariadb
MARIADB_SOCKET=$CDCLAKE_RUN/mariadb.sock

log() { printf '%s [infra] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  printf '%s [infra] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2
  exit 1
}

ensure_dirs() { mkdir -p "$LOG_DIR" "$DATA_DIR" "$PID_DIR" "$CONF_DIR" "$CDCLAKE_CACHE"; }

# java_bin prints a Java 17+ executable: $JAVA_HOME, else the Debian JDK 17,
# else java on PATH.
java_bin() {
  local j
  if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
    j=$JAVA_HOME/bin/java
  elif [[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]]; then
    j=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    j=$(command -v java) || die "no java on PATH (Java 17 is needed)"
  fi
  local v
  v=$("$j" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  [[ ${v%%.*} -ge 17 ]] || die "$j is Java $v; Java 17 or newer is needed"
  printf '%s\n' "$j"
}

java_home() { local j; j=$(java_bin); dirname "$(dirname "$(readlink -f "$j")")"; }

# run_exclusive SCRIPT ARGS...: runs SCRIPT under the machine-wide INFRA_LOCK
# (waiting up to INFRA_LOCK_WAIT seconds for a run that holds it) and exits
# with its status; inside, or without flock(1), it returns at once. A script
# calls it first: run_exclusive "$0" "$@". The lock's descriptor is closed
# for SCRIPT (flock -o), so services it starts do not keep the lock.
run_exclusive() {
  [[ -z ${CDCLAKE_INFRA_LOCKED:-} ]] || return 0
  command -v flock >/dev/null 2>&1 || return 0
  export CDCLAKE_INFRA_LOCKED=$$
  if ! flock -n "$INFRA_LOCK" true; then
    log "another e2e-real or infra-capture on this machine holds $INFRA_LOCK; waiting for it (up to ${INFRA_LOCK_WAIT}s)"
  fi
  local rc=0
  flock -o -w "$INFRA_LOCK_WAIT" -E 75 "$INFRA_LOCK" "$@" || rc=$?
  ((rc != 75)) || die "gave up after ${INFRA_LOCK_WAIT}s waiting for $INFRA_LOCK"
  exit "$rc"
}

need_cmd() { command -v "$1" >/dev/null 2>&1 || die "$1 is needed but not on PATH${2:+ ($2)}"; }

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

pidfile() { printf '%s/%s.pid\n' "$PID_DIR" "$1"; }

# running NAME: true when NAME's recorded pid is alive.
running() {
  local f
  f=$(pidfile "$1")
  [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start_bg NAME LOGFILE CMD...: runs CMD detached in its own session, its
# stdout and stderr appended to LOGFILE, and records its pid.
start_bg() {
  local name=$1 logf=$2
  shift 2
  printf '\n==== %s start %s ====\n' "$name" "$(date -Is)" >>"$logf"
  setsid nohup "$@" >>"$logf" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

# stop_pid NAME [TIMEOUT]: SIGTERM to NAME's process group, SIGKILL after
# TIMEOUT seconds (default 30).
stop_pid() {
  local name=$1 timeout=${2:-30} f pid i
  f=$(pidfile "$name")
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name did not stop in ${timeout}s; SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
}

# wait_until DESCRIPTION TIMEOUT_S LOGFILE PIDNAME CMD...: polls CMD until it
# succeeds. Fails with the tail of LOGFILE when the time runs out or when the
# process PIDNAME (if not empty) has died.
wait_until() {
  local what=$1 timeout=$2 logf=$3 name=$4
  shift 4
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if [[ -n $name ]] && ! running "$name"; then
      [[ -f $logf ]] && tail -n 40 "$logf" >&2
      die "$name exited while waiting for $what (log: $logf)"
    fi
    if ((SECONDS - start >= timeout)); then
      [[ -f $logf ]] && tail -n 40 "$logf" >&2
      die "timed out after ${timeout}s waiting for $what (log: $logf)"
    fi
    sleep 0.5
  done
  log "$what: ready after $((SECONDS - start))s"
}

# port_free_or_ours NAME PORT: fails when PORT is taken by a process that is
# not NAME's.
port_free_or_ours() {
  if port_open "$2" && ! running "$1"; then
    die "127.0.0.1:$2 is already in use by another process (needed by $1); stop it or set the port variable"
  fi
}

# Runs a Kafka tool class (TopicCommand, ConsoleConsumer, ...) on Kafka's jars.
kafka_tool() {
  local cls=$1
  shift
  # shellcheck disable=SC2086
  "$(java_bin)" $TOOLS_HEAP_OPTS "${JVM_TOOL_OPTS[@]}" \
    -Dlog4j2.configurationFile="$INFRA_DIR/conf/log4j2-tools.properties" \
    -cp "$KAFKA_LIBS/*" "$cls" "$@"
}

# pg_as_owner CMD...: runs a PostgreSQL server program as the cluster owner
# (root may not run postgres: as root the Debian "postgres" user is used).
pg_as_owner() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

psql_shop() { psql -X -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U postgres -d "$PG_DB" "$@"; }

# maria [DB] ARGS...: the mariadb client as root over the server's socket,
# UTF-8 (utf8mb4), UTC session time zone.
maria() {
  mariadb --no-defaults --socket="$MARIADB_SOCKET" -u root --default-character-set=utf8mb4 \
    --init-command="SET time_zone = '+00:00'" "$@"
}

# mem_kb FIELD PID: FIELD (Rss or Pss, from /proc/PID/smaps_rollup) summed
# over PID and its children, in KiB. Pss shares shared memory out among the
# processes (PostgreSQL's shared buffers are counted once); Rss counts it in
# each process.
mem_kb() {
  local field=$1 total=0 p v
  for p in $2 $(pgrep -P "$2" 2>/dev/null || true); do
    v=$(awk -v f="$field:" '$1 == f {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
