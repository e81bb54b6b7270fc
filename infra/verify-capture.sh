#!/usr/bin/env bash
# Lands the committed capture (testdata/debezium-real) with ./bin/cdclake into
# temporary file lakes and verifies them against the capture and the saved
# PostgreSQL and MariaDB states (_postgres.json, _mariadb.json), and the Avro
# topics' lake against the JSON one: no service is started.
# usage: infra/verify-capture.sh [CAPTURE_DIR]   (VERIFY_SPARK=0: DuckDB only)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_dirs

capture=${1:-$REPO_DIR/testdata/debezium-real}
[[ -f $capture/_postgres.json && -f $capture/_mariadb.json ]] ||
  die "$capture has no _postgres.json or _mariadb.json; capture with infra/capture.sh"
"$INFRA_DIR/install.sh" python
(cd "$REPO_DIR" && go build -o bin/cdclake ./cmd/cdclake)
work=$(mktemp -d "$CDCLAKE_RUN/verify-capture.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$REPO_DIR/bin/cdclake" run --source "$capture/shop.*.ndjson" --sink "$work/lake" >"$work/shop.log" 2>&1 ||
  { cat "$work/shop.log" >&2; die "cdclake run failed (shop)"; }
"$REPO_DIR/bin/cdclake" run --source "$capture/*shopraw*.ndjson" --sink "$work/lake-raw" >"$work/shopraw.log" 2>&1 ||
  { cat "$work/shopraw.log" >&2; die "cdclake run failed (shopraw)"; }
"$REPO_DIR/bin/cdclake" run --source "$capture/*shopraw*.ndjson" --sink "$work/lake-catalog" \
  --config "$REPO_DIR/testdata/e2e/shopraw-catalog.yaml" >"$work/catalog.log" 2>&1 ||
  { cat "$work/catalog.log" >&2; die "cdclake run failed (shopraw with its catalog)"; }
"$REPO_DIR/bin/cdclake" run --source "$capture/maria*.ndjson" --sink "$work/lake-maria" >"$work/maria.log" 2>&1 ||
  { cat "$work/maria.log" >&2; die "cdclake run failed (maria)"; }
printf 'source:\n  schema_registry:\n    url: %s\n' "$capture/_schemas.json" >"$work/avro.yaml"
"$REPO_DIR/bin/cdclake" run --source "$capture/shopavro.*.b64" --sink "$work/lake-avro" --config "$work/avro.yaml" \
  >"$work/avro.log" 2>&1 || { cat "$work/avro.log" >&2; die "cdclake run failed (shopavro)"; }
spark=()
[[ ${VERIFY_SPARK:-1} == 1 ]] || spark=(--no-spark)
JAVA_HOME=$(java_home) TZ=UTC SPARK_LOCAL_IP=$HOST "$VPY" "$INFRA_DIR/verify_real.py" \
  --capture "$capture" --pg-dump "$capture/_postgres.json" \
  --lake "shop=$work/lake" --lake "shopraw=$work/lake-raw" \
  --lake "shopraw+catalog=$work/lake-catalog" "${spark[@]}" \
  --report "$CDCLAKE_RUN/verify-capture-report.txt" \
  2> >(grep -v -E '^(WARNING|Using Spark|Setting default log level|To adjust logging|.*WARN NativeCodeLoader)' >&2)
JAVA_HOME=$(java_home) TZ=UTC SPARK_LOCAL_IP=$HOST "$VPY" "$INFRA_DIR/verify_mariadb.py" \
  --capture "$capture" --dump "$capture/_mariadb.json" --lake "$work/lake-maria" "${spark[@]}" \
  --report "$CDCLAKE_RUN/verify-capture-mariadb-report.txt" \
  2> >(grep -v -E '^(WARNING|Using Spark|Setting default log level|To adjust logging|.*WARN NativeCodeLoader)' >&2)
JAVA_HOME=$(java_home) TZ=UTC SPARK_LOCAL_IP=$HOST "$VPY" "$INFRA_DIR/verify_avro.py" \
  --avro "$work/lake-avro" --json "$work/lake" "${spark[@]}" \
  --report "$CDCLAKE_RUN/verify-capture-avro-report.txt" \
  2> >(grep -v -E '^(WARNING|Using Spark|Setting default log level|To adjust logging|.*WARN NativeCodeLoader)' >&2)
