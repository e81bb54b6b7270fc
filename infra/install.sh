#!/usr/bin/env bash
# Installs the pinned services into $CDCLAKE_CACHE (idempotent: what is there
# is reused). Usage: infra/install.sh [kafka|debezium|registry|versitygw|postgres|mariadb|python|iceberg-spark|iceberg-rest ...]
# (default: all). The independent downloads run in parallel.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_dirs

MVN_FLAGS=(-B -q --no-transfer-progress -Dstyle.color=never -Dmaven.repo.local="$M2_REPO")
DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:$MAVEN_DEPENDENCY_PLUGIN

# mvn_copy NAME OUTDIR DEPENDENCIES_XML [copy-dependencies options...]:
# resolves the dependencies of a generated pom and copies their jars to
# OUTDIR (replaced atomically; skipped when OUTDIR/.complete matches).
mvn_copy() {
  local name=$1 out=$2 deps=$3
  shift 3
  local stamp="$deps $*"
  if [[ -f $out/.complete && "$(cat "$out/.complete")" == "$stamp" ]]; then
    log "$name: cached in $out"
    return 0
  fi
  need_cmd mvn "Debian package maven"
  local build=$CDCLAKE_CACHE/build/$name
  rm -rf "$build" && mkdir -p "$build"
  cat >"$build/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.cdclake.infra</groupId>
  <artifactId>$name</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
</project>
EOF
  log "$name: resolving from Maven Central"
  local t=$SECONDS
  # (Maven 3.8 prints colour resets even in batch mode; they are stripped.)
  (cd "$build" && JAVA_HOME=$(java_home) mvn "${MVN_FLAGS[@]}" "$DEP_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$build/out" "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g') ||
    die "$name: Maven could not resolve the dependencies (pom: $build/pom.xml)"
  rm -rf "$out.tmp" && mkdir -p "$(dirname "$out")"
  mv "$build/out" "$out.tmp"
  printf '%s' "$stamp" >"$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "$name: $(find "$out" -name '*.jar' | wc -l) jars in $((SECONDS - t))s"
}

dep() { printf '    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n' "$@"; }

install_kafka() {
  # The broker (kafka_2.13), the tools (console consumer, topics, storage
  # format; kafka-tools also brings connect-runtime and connect-json, which
  # run Kafka Connect), and the logging backend the distribution ships.
  local deps
  deps=$(
    dep org.apache.kafka "kafka_$SCALA_BINARY" "$KAFKA_VERSION"
    dep org.apache.kafka kafka-tools "$KAFKA_VERSION"
    dep org.apache.kafka connect-runtime "$KAFKA_VERSION"
    dep org.apache.kafka connect-json "$KAFKA_VERSION"
    dep org.apache.kafka connect-transforms "$KAFKA_VERSION"
    dep org.slf4j slf4j-api "$SLF4J_VERSION"
    dep org.apache.logging.log4j log4j-api "$LOG4J_VERSION"
    dep org.apache.logging.log4j log4j-core "$LOG4J_VERSION"
    dep org.apache.logging.log4j log4j-slf4j2-impl "$LOG4J_VERSION"
  )
  mvn_copy kafka "$KAFKA_LIBS" "$deps"
}

install_debezium() {
  # A Connect plugin directory: the connector and its own dependencies; the
  # Kafka and SLF4J APIs come from the worker.
  mvn_copy debezium-connector-postgres "$CONNECT_PLUGIN_PATH/debezium-connector-postgres" \
    "$(dep io.debezium debezium-connector-postgres "$DEBEZIUM_VERSION")" \
    -DexcludeGroupIds=org.apache.kafka,org.slf4j
  # The MariaDB connector in a folder of its own: Connect isolates plugins,
  # so its Debezium version may differ from the PostgreSQL connector's.
  mvn_copy debezium-connector-mariadb "$CONNECT_PLUGIN_PATH/debezium-connector-mariadb" \
    "$(dep io.debezium debezium-connector-mariadb "$DEBEZIUM_MARIADB_VERSION")" \
    -DexcludeGroupIds=org.apache.kafka,org.slf4j
}

# mvn_build DIR ARGS...: runs Maven in DIR on the local repository of the
# cache (output to this lane's log, colour resets stripped).
mvn_build() {
  local dir=$1
  shift
  (cd "$dir" && JAVA_HOME=$(java_home) mvn "${MVN_FLAGS[@]}" "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
}

install_registry() {
  # Apicurio Registry as a Quarkus fast-jar built from its published app
  # module (infra/registry/pom.xml), and the Apicurio Avro converter as a
  # Connect plugin. Both are skipped when their stamps match.
  install_registry_app
  install_registry_converter
}

install_registry_app() {
  local src=$INFRA_DIR/registry
  # Rebuilt when a version or a file of infra/registry/ changes.
  local stamp
  stamp="$APICURIO_REGISTRY_VERSION $QUARKUS_PLUGIN_VERSION $EVERIT_JSON_SCHEMA_VERSION $MAVEN_DEPENDENCY_PLUGIN $(
    cd "$src" && find . -type f ! -path '*/target/*' -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-16
  )"
  if [[ -f $REGISTRY_HOME/.complete && "$(cat "$REGISTRY_HOME/.complete")" == "$stamp" ]]; then
    log "apicurio-registry: cached in $REGISTRY_HOME"
    return 0
  fi
  need_cmd mvn "Debian package maven"
  local build=$CDCLAKE_CACHE/build/apicurio-registry t=$SECONDS
  rm -rf "$build" && mkdir -p "$build"
  cp -r "$src/." "$build/"
  # The deployment side of a Quarkus extension the app uses is not served:
  # infra/registry/config-index-deployment replaces it (local repository).
  log "apicurio-registry: building config-index-deployment into $M2_REPO"
  mvn_build "$build/config-index-deployment" install -Dquarkus.version="$QUARKUS_PLUGIN_VERSION" ||
    die "apicurio-registry: building config-index-deployment failed"
  log "apicurio-registry $APICURIO_REGISTRY_VERSION: resolving from Maven Central and building (Quarkus $QUARKUS_PLUGIN_VERSION)"
  mvn_build "$build" package -Dapicurio.registry.version="$APICURIO_REGISTRY_VERSION" \
    -Dquarkus.version="$QUARKUS_PLUGIN_VERSION" -Deverit.json.schema.version="$EVERIT_JSON_SCHEMA_VERSION" \
    -Dmaven.dependency.plugin.version="$MAVEN_DEPENDENCY_PLUGIN" -Dquarkus.package.type=fast-jar ||
    die "apicurio-registry: the Quarkus build failed (pom: $build/pom.xml)"
  [[ -f $build/target/quarkus-app/quarkus-run.jar ]] || die "apicurio-registry: no quarkus-run.jar in $build/target/quarkus-app"
  rm -rf "$REGISTRY_HOME.tmp"
  mv "$build/target/quarkus-app" "$REGISTRY_HOME.tmp"
  printf '%s' "$stamp" >"$REGISTRY_HOME.tmp/.complete"
  rm -rf "$REGISTRY_HOME" && mv "$REGISTRY_HOME.tmp" "$REGISTRY_HOME"
  rm -rf "$build"
  log "apicurio-registry: built in $((SECONDS - t))s ($(du -sm "$REGISTRY_HOME" | cut -f1) MB, $REGISTRY_HOME)"
}

install_registry_converter() {
  # A plugin folder of its own on Connect's plugin path (beside Debezium's,
  # which mvn_copy replaces without touching it): the converter and its
  # dependencies, minus what the worker has (Kafka, its compression codecs,
  # SLF4J).
  mvn_copy apicurio-registry-converter "$REGISTRY_CONVERTER_DIR" \
    "$(dep io.apicurio apicurio-registry-utils-converter "$APICURIO_CONVERTER_VERSION")" \
    -DexcludeGroupIds=org.apache.kafka,org.slf4j,com.github.luben,org.lz4,org.xerial.snappy
  # Connect runs with plugin.discovery=service_load, and the converter's jar
  # has no ServiceLoader manifest: a small jar adds one.
  local jar=$REGISTRY_CONVERTER_DIR/cdclake-converter-services.jar
  [[ -f $jar ]] && return 0
  local d
  d=$(mktemp -d)
  mkdir -p "$d/META-INF/services"
  printf '%s\n' io.apicurio.registry.utils.converter.AvroConverter \
    io.apicurio.registry.utils.converter.ExtJsonConverter >"$d/META-INF/services/org.apache.kafka.connect.storage.Converter"
  local jar_cmd
  jar_cmd="$(java_home)/bin/jar"
  [[ -x $jar_cmd ]] || jar_cmd=$(command -v jar) || die "the JDK's jar tool is needed (Debian package openjdk-17-jdk-headless)"
  "$jar_cmd" --create --file "$jar.tmp" -C "$d" META-INF && mv "$jar.tmp" "$jar"
  rm -rf "$d"
  log "apicurio-registry-converter: ServiceLoader manifest in $jar"
}

install_versitygw() {
  if [[ -x $VERSITYGW_BIN ]]; then
    log "versitygw: cached at $VERSITYGW_BIN"
    return 0
  fi
  need_cmd go "Go toolchain"
  log "versitygw $VERSITYGW_VERSION: go install (about 2 minutes on 2 cores)"
  local t=$SECONDS dir
  dir=$(dirname "$VERSITYGW_BIN")
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  # Only the Go module proxy ($GOPROXY, default proxy.golang.org) is needed:
  # where only package registries are reachable (CI), sum.golang.org may not
  # be, so the checksum database is off for this one install (versitygw's own
  # go.sum still pins every dependency it builds with). -mod=mod lets the
  # build complete a go.sum that lacks an entry instead of failing.
  GOBIN="$dir.tmp" GOMODCACHE="$CDCLAKE_CACHE/go/mod" GOCACHE="$CDCLAKE_CACHE/go/build" \
    GOFLAGS="-mod=mod -modcacherw -buildvcs=false" GOSUMDB=off GOWORK=off CGO_ENABLED=0 \
    go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" ||
    die "versitygw: go install failed (GOPROXY=$(go env GOPROXY))"
  # Only the binary is kept; the module and build caches are not needed again.
  rm -rf "$CDCLAKE_CACHE/go"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "versitygw: built in $((SECONDS - t))s"
}

install_postgres() {
  if [[ -x $PG_BIN/postgres && -x $PG_BIN/initdb && -x $PG_BIN/pg_ctl ]]; then
    log "postgresql-$PG_MAJOR: installed ($("$PG_BIN/postgres" --version))"
  else
    # policy-rc.d would keep Debian's own "main" cluster from starting; it is
    # harmless here (port 5432) and left to the package's defaults.
    apt_install "postgresql-$PG_MAJOR" "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR"
  fi
  need_cmd psql "postgresql-client-$PG_MAJOR"
  if [[ $EUID -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    die "the Debian package did not create the postgres user"
  fi
}

# apt_install WHAT PACKAGES...: apt-get install (root, or sudo -n); the
# package lists are updated once per run.
apt_updated=0
apt_install() {
  local what=$1 sudo=()
  shift
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || die "$what is not installed and installing it needs root (apt-get)"
    sudo=(sudo -n)
  fi
  log "$what: apt-get install $*"
  if ((!apt_updated)); then
    "${sudo[@]}" apt-get update -q >>"$LOG_DIR/install-apt.log" 2>&1 || { tail "$LOG_DIR/install-apt.log" >&2; die "apt-get update failed"; }
    apt_updated=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
    >>"$LOG_DIR/install-apt.log" 2>&1 ||
    { tail "$LOG_DIR/install-apt.log" >&2; die "apt-get install $* failed (log: $LOG_DIR/install-apt.log)"; }
}

install_mariadb() {
  if [[ -x $MARIADB_BIN && -x $(command -v mariadb-install-db || true) && -x $(command -v mariadb || true) ]]; then
    log "mariadb: installed ($("$MARIADB_BIN" --version))"
    return 0
  fi
  # The package's own server is not started here (policy-rc.d); start.sh runs
  # one on its own data folder and port.
  apt_install mariadb-server mariadb-server mariadb-client
}

install_python() {
  local stamp_file=$VENV/.infra-complete
  local reqs="pyspark==$PYSPARK_VERSION duckdb==$DUCKDB_VERSION psycopg[binary]==$PSYCOPG_VERSION pytz==$PYTZ_VERSION"
  if [[ -f $stamp_file && "$(cat "$stamp_file")" == "$reqs" ]]; then
    log "python: venv cached at $VENV"
    return 0
  fi
  need_cmd python3
  log "python: venv with $reqs"
  local t=$SECONDS
  [[ -x $VPY ]] || python3 -m venv "$VENV"
  # pyspark is a 456 MB source distribution; pip builds a wheel once and keeps
  # it in the cache, so a second venv installs in seconds.
  # shellcheck disable=SC2086
  PIP_CACHE_DIR=$CDCLAKE_CACHE/pip "$VPY" -m pip install -q --disable-pip-version-check $reqs ||
    die "python: pip install failed"
  printf '%s' "$reqs" >"$stamp_file"
  log "python: ready in $((SECONDS - t))s"
}

# Spark with Iceberg's runtime and Delta Lake (reading cdclake's Iceberg and
# Delta tables): the Iceberg runtime, the AWS bundle (S3FileIO), sqlite-jdbc,
# delta-spark and delta-storage, without their dependencies (the first two
# are shaded; Delta's need only what Spark ships), and a venv with the
# pyspark they are built for.
install_iceberg-spark() {
  local deps
  deps=$(
    dep org.apache.iceberg "iceberg-spark-runtime-4.1_$SCALA_BINARY" "$ICEBERG_VERSION"
    dep org.apache.iceberg iceberg-aws-bundle "$ICEBERG_VERSION"
    dep org.xerial sqlite-jdbc "$SQLITE_JDBC_VERSION"
    dep io.delta "delta-spark_$SCALA_BINARY" "$DELTA_SPARK_VERSION"
    dep io.delta delta-storage "$DELTA_SPARK_VERSION"
  )
  mvn_copy iceberg-spark "$ICEBERG_SPARK_JARS" "$deps" -DexcludeTransitive=true
  local stamp_file=$ICEBERG_SPARK_VENV/.infra-complete reqs="pyspark==$ICEBERG_PYSPARK_VERSION"
  if [[ -f $stamp_file && "$(cat "$stamp_file")" == "$reqs" ]]; then
    log "iceberg-spark: venv cached at $ICEBERG_SPARK_VENV"
    return 0
  fi
  need_cmd python3
  local t=$SECONDS
  [[ -x $ICEBERG_SPARK_VENV/bin/python ]] || python3 -m venv "$ICEBERG_SPARK_VENV"
  PIP_CACHE_DIR=$CDCLAKE_CACHE/pip "$ICEBERG_SPARK_VENV/bin/python" -m pip install -q --disable-pip-version-check $reqs ||
    die "iceberg-spark: pip install failed"
  printf '%s' "$reqs" >"$stamp_file"
  log "iceberg-spark: $reqs ready in $((SECONDS - t))s"
}

# Iceberg's REST catalog as Apache Iceberg's tests serve it: the
# fixture's jars (versions.env says which and why) and RestCatalog.java, a
# launcher that serves the fixture's servlet on $HOST only (the fixture's
# own main listens on every interface), compiled against them.
install_iceberg-rest() {
  local deps
  # A dependency with a classifier, and one without its dependencies.
  classified() { printf '    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version><classifier>%s</classifier></dependency>\n' "$@"; }
  alone() { printf '    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>\n' "$@"; }
  deps=$(
    classified org.apache.iceberg iceberg-open-api "$ICEBERG_REST_VERSION" test-fixtures
    dep org.apache.iceberg iceberg-core "$ICEBERG_REST_VERSION"
    classified org.apache.iceberg iceberg-core "$ICEBERG_REST_VERSION" tests
    dep org.eclipse.jetty.ee10 jetty-ee10-servlet "$JETTY_VERSION"
    dep org.eclipse.jetty.compression jetty-compression-server "$JETTY_VERSION"
    dep org.eclipse.jetty.compression jetty-compression-gzip "$JETTY_VERSION"
    dep org.xerial sqlite-jdbc "$SQLITE_JDBC_VERSION"
    dep org.slf4j slf4j-simple "$SLF4J_VERSION"
    alone org.apache.hadoop hadoop-common "$HADOOP_VERSION"
    alone org.apache.hadoop hadoop-auth "$HADOOP_VERSION"
    dep com.fasterxml.woodstox woodstox-core "$WOODSTOX_VERSION"
    dep org.codehaus.woodstox stax2-api "$STAX2_VERSION"
    dep org.apache.hadoop.thirdparty hadoop-shaded-guava "$HADOOP_SHADED_GUAVA_VERSION"
    dep commons-collections commons-collections "$COMMONS_COLLECTIONS_VERSION"
    dep org.apache.commons commons-configuration2 "$COMMONS_CONFIGURATION2_VERSION"
    # S3FileIO, for tables on the S3 server, and the AWS SDK it needs.
    dep org.apache.iceberg iceberg-aws "$ICEBERG_REST_VERSION"
    dep org.apache.iceberg iceberg-aws-bundle "$ICEBERG_REST_VERSION"
  )
  mvn_copy iceberg-rest "$ICEBERG_REST_LIBS" "$deps"
  local src=$INFRA_DIR/iceberg-rest/RestCatalog.java out=$ICEBERG_REST_LIBS/launcher sum
  sum=$(sha256sum "$src" | cut -c1-16)
  if [[ -f $out/.complete && "$(cat "$out/.complete")" == "$sum" ]]; then
    log "iceberg-rest: launcher cached in $out"
    return 0
  fi
  rm -rf "$out" && mkdir -p "$out"
  "$(java_home)/bin/javac" -nowarn -cp "$ICEBERG_REST_LIBS/*" -d "$out" "$src" || die "iceberg-rest: compiling $src failed"
  printf '%s' "$sum" >"$out/.complete"
  log "iceberg-rest: launcher compiled"
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(postgres mariadb kafka debezium registry versitygw python iceberg-spark iceberg-rest)

# Maven installs share the local repository and run one after the other
# (Kafka, Debezium, then the registry build and its converter); the other
# downloads run beside them.
declare -A lanes=()
maven_lane=()
for c in "${components[@]}"; do
  case $c in
  kafka | debezium | registry | iceberg-spark | iceberg-rest) maven_lane+=("$c") ;;
  versitygw | python | postgres | mariadb) lanes[$c]=1 ;;
  *) die "unknown component $c (kafka debezium registry versitygw postgres mariadb python iceberg-spark iceberg-rest)" ;;
  esac
done

t0=$SECONDS
pids=()
names=()
run_lane() { # NAME FUNCTIONS...: runs in the background, output to a log
  local name=$1
  shift
  (for f in "$@"; do "install_$f"; done) >"$LOG_DIR/install-$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}
# apt first and in the foreground: it must not race anything.
if [[ -n ${lanes[postgres]:-} ]]; then install_postgres; fi
if [[ -n ${lanes[mariadb]:-} ]]; then install_mariadb; fi
if [[ ${#maven_lane[@]} -gt 0 ]]; then run_lane maven "${maven_lane[@]}"; fi
if [[ -n ${lanes[versitygw]:-} ]]; then run_lane versitygw versitygw; fi
if [[ -n ${lanes[python]:-} ]]; then run_lane python python; fi

failed=()
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    grep -F '[infra]' "$LOG_DIR/install-${names[$i]}.log" >&2 || true
  else
    failed+=("${names[$i]}")
    tail -n 30 "$LOG_DIR/install-${names[$i]}.log" >&2
  fi
done
[[ ${#failed[@]} -eq 0 ]] || die "install failed: ${failed[*]} (logs in $LOG_DIR/install-*.log)"
log "install done in $((SECONDS - t0))s (cache: $CDCLAKE_CACHE)"
