#!/usr/bin/env bash
# Stops every service started by infra/start.sh (Connect, the registry, Kafka,
# versitygw, PostgreSQL, MariaDB).
# Usage: infra/stop.sh [--purge] | infra/stop.sh SERVICE...
#   --purge   also deletes the services' data ($CDCLAKE_RUN/data, conf, pids);
#             logs and the download cache are kept.
#   s3        stops only the S3 server (an outage; infra/start.sh s3 ends it).
#   kafka     stops only the broker (a restart, with infra/start.sh kafka).
#   connect   stops only Kafka Connect (a restart, with infra/start.sh connect).
#   registry  stops only Apicurio Registry; its storage is in memory, so its
#             schemas are gone (restart Connect too, its converters cache ids).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

purge=0
named=()
for a in "$@"; do
  case $a in
  --purge) purge=1 ;;
  s3 | kafka | connect | registry | iceberg-rest) named+=("$a") ;;
  *) die "usage: infra/stop.sh [--purge] | infra/stop.sh SERVICE... (s3 kafka connect registry iceberg-rest)" ;;
  esac
done
# Named services only: each of them, in the order given.
if ((${#named[@]})); then
  for a in "${named[@]}"; do
    case $a in
    s3) stop_pid versitygw 10 ;;
    kafka) stop_pid kafka 60 ;;
    connect) stop_pid connect 60 ;;
    registry) stop_pid registry 30 ;;
    iceberg-rest) stop_pid iceberg-rest 15 ;;
    esac
  done
  exit 0
fi

# Connect first, so the connectors stop cleanly while Kafka (and the registry
# their converters may call) are still there.
stop_pid connect 60
stop_pid registry 30
stop_pid iceberg-rest 15
stop_pid kafka 60
stop_pid versitygw 10
if [[ -f $PG_DATA/postmaster.pid && -x $PG_BIN/pg_ctl ]]; then
  # A server killed with its host (or by kill -9) leaves postmaster.pid
  # behind; pg_ctl then fails to signal a process that is gone. Such a file
  # says nothing is running, so it is removed rather than treated as an error.
  pg_pid=$(head -n1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
  if [[ $pg_pid =~ ^[0-9]+$ ]] && kill -0 "$pg_pid" 2>/dev/null &&
    [[ $(cat "/proc/$pg_pid/comm" 2>/dev/null) == postgres* ]]; then
    log "stopping postgres"
    pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null ||
      die "pg_ctl stop failed (log: $LOG_DIR/postgres.log)"
  else
    log "postgres is not running (stale postmaster.pid of pid ${pg_pid:-?} removed)"
    rm -f "$PG_DATA/postmaster.pid"
  fi
fi
rm -f "$(pidfile postgres)"
stop_pid mariadb 60
if ((purge)); then
  rm -rf "$DATA_DIR" "$CONF_DIR" "$PID_DIR" "$PG_SOCKET_DIR"
  log "purged $DATA_DIR"
fi
log "all services stopped"
