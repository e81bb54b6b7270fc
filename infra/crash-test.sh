#!/usr/bin/env bash
# The crash harness against the services of infra/ (make crash-test): Kafka
# and the S3 server are started (and left running), then
#   TestKafkaKill9    SIGKILL at random moments on two 6-partition topics
#                     (CRASH_KILL9_EVENTS changes per format, CRASH_KILLS kills)
#   TestCrashHarness  kills, lost replies, scaling 1 -> 4 -> 1 with a paused
#                     zombie, an S3 outage of CRASH_OUTAGE seconds, a broker
#                     restart, a poisoned partition and DuckDB samples, on
#                     one topic of CRASH_EVENTS mixed changes over 24
#                     tables; then an out-of-range restart on a small topic
# Its summary line is printed and kept in $CDCLAKE_RUN/crash/summary.txt.
# With CRASH_TABLE_FORMAT=iceberg every table is committed to Iceberg, the
# committer is killed under a running instance, and pyiceberg reads the
# tables back (make test's Python, .venv, must be set up); with
# CRASH_TABLE_FORMAT=delta every table is a Delta table, the proxy loses
# replies of log versions too, and delta-rs reads the tables back.
#
# usage: infra/crash-test.sh [short]   ("short" runs the CI sizes)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [[ ${1:-} == short ]]; then
  CRASH_EVENTS=${CRASH_EVENTS:-30000} CRASH_KILLS=${CRASH_KILLS:-5} CRASH_OUTAGE=${CRASH_OUTAGE:-10}
  CRASH_BROKER_DOWN=${CRASH_BROKER_DOWN:-5}
  CRASH_KILL9_EVENTS=${CRASH_KILL9_EVENTS:-12000}
else
  CRASH_EVENTS=${CRASH_EVENTS:-1000000} CRASH_KILLS=${CRASH_KILLS:-20} CRASH_OUTAGE=${CRASH_OUTAGE:-30}
  CRASH_BROKER_DOWN=${CRASH_BROKER_DOWN:-15}
  CRASH_KILL9_EVENTS=${CRASH_KILL9_EVENTS:-100000}
fi
"$INFRA_DIR/install.sh" >/dev/null
"$INFRA_DIR/start.sh" kafka s3
keep=$CDCLAKE_RUN/crash
rm -rf "$keep" && mkdir -p "$keep"
cd "$REPO_DIR"
rc=0
CDCLAKE_TEST_KAFKA_BROKERS=$KAFKA_BOOTSTRAP CDCLAKE_CRASH_EVENTS=$CRASH_KILL9_EVENTS CDCLAKE_CRASH_KILLS=$CRASH_KILLS \
  go test -count=1 -timeout 60m -v -run 'TestKafkaKill9' ./cmd/cdclake/ 2>&1 | grep -E 'kafka_test|^(---|ok|FAIL)' || rc=1
CDCLAKE_TEST_KAFKA_BROKERS=$KAFKA_BOOTSTRAP \
  CDCLAKE_TEST_S3_URL="s3://scratch?endpoint=http://$HOST:$S3_PORT&use_path_style=true&disable_https=true&region=us-east-1" \
  CDCLAKE_TEST_S3_DIR="$DATA_DIR/s3/scratch" CDCLAKE_TEST_INFRA="$INFRA_DIR" CDCLAKE_TEST_PYTHON="$VPY" \
  AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=us-east-1 \
  CDCLAKE_CRASH_EVENTS=$CRASH_EVENTS CDCLAKE_CRASH_KILLS=$CRASH_KILLS CDCLAKE_CRASH_OUTAGE=$CRASH_OUTAGE \
  CDCLAKE_CRASH_BROKER_DOWN=$CRASH_BROKER_DOWN CDCLAKE_TEST_KEEP=$keep \
  CDCLAKE_CRASH_TABLE_FORMAT=${CRASH_TABLE_FORMAT:-} CDCLAKE_PYTHON="$REPO_DIR/.venv/bin/python" \
  go test -count=1 -timeout 80m -v -run 'TestCrashHarness' ./cmd/cdclake/ 2>&1 | grep -E 'crash_test|^(---|ok|FAIL)' || rc=1
# The harness's lake is large; its summary stays.
rm -rf "$DATA_DIR"/s3/scratch/crash-* "$DATA_DIR"/s3/scratch/gap-*
exit $rc
