#!/usr/bin/env bash
# Fetch a set of JVM jars from Maven Central into a git-ignored cache:
#   jars.sh [spark]  the jars limno's Spark pipeline passes to Spark (spark.jars):
#                    scripts/jars/pom.xml's dependencies (hadoop-aws matching the Hadoop
#                    inside the pinned PySpark, and its AWS SDK v2 bundle), into
#                    .cache/jars/ (or $LIMNO_SPARK_JARS_DIR);
#   jars.sh kafka    a single-node Apache Kafka broker (scripts/kafka/pom.xml) for the
#                    Kafka tests and `make kafka`, into .cache/kafka-jars/ (or
#                    $LIMNO_KAFKA_JARS_DIR): a directory of its own, never on Spark's path;
#   jars.sh connect  a Kafka Connect standalone worker matching that broker
#                    (scripts/connect/pom.xml) into .cache/connect-jars/ (or
#                    $LIMNO_CONNECT_JARS_DIR), and the Debezium PostgreSQL source and JDBC
#                    sink connectors' plugin archives unpacked into .cache/connect-plugins/
#                    (or $LIMNO_CONNECT_PLUGINS_DIR), for the CDC chain (tests/cdc).
# Idempotent: does nothing when the pom and this script are unchanged since the
# last successful run. Needs Java and Maven (`mvn`) on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-spark}" in
  spark) what=Spark pom=scripts/jars/pom.xml dest=${LIMNO_SPARK_JARS_DIR:-.cache/jars} ;;
  kafka) what=Kafka pom=scripts/kafka/pom.xml dest=${LIMNO_KAFKA_JARS_DIR:-.cache/kafka-jars} ;;
  connect) what=Connect pom=scripts/connect/pom.xml dest=${LIMNO_CONNECT_JARS_DIR:-.cache/connect-jars} ;;
  *) echo "error: jars.sh: unknown jar set '$1' (spark, kafka or connect)" >&2; exit 2 ;;
esac
# Debezium 3.6.0.Final: the newest release whose JDBC sink Maven Central serves
# (3.6.1.Final has the PostgreSQL connector only); both connectors of one release
plugins=""
plugins_dest=${LIMNO_CONNECT_PLUGINS_DIR:-.cache/connect-plugins}
if [[ "${1:-spark}" == connect ]]; then
  plugins="io.debezium:debezium-connector-postgres:3.6.0.Final:tar.gz:plugin
io.debezium:debezium-connector-jdbc:3.6.0.Final:tar.gz:plugin"
fi
stamp="$dest/.stamp"
want=$(cat "$pom" scripts/jars.sh | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && (-z "$plugins" || -d "$plugins_dest") ]]; then
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "error: jars.sh needs Maven (mvn) to fetch the $what jars (e.g. apt-get install maven)" >&2
  exit 1
fi
echo "jars: fetching $what jars from Maven Central into $dest" >&2
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$tmp/mvn.log"
if ! mvn -q -B -Dstyle.color=never -f "$pom" \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DoutputDirectory="$(cd "$tmp" && pwd)" -DincludeScope=runtime >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: mvn could not fetch the $what jars (see above)" >&2
  exit 1
fi
# plugin archives: each artifact alone (copy, not copy-dependencies: their own
# dependencies are inside the archive, and resolving them would reach other repositories)
for artifact in $plugins; do
  if ! mvn -q -B -Dstyle.color=never -f "$pom" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy -Dartifact="$artifact" \
    -DoutputDirectory="$(cd "$tmp" && pwd)/plugins" >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: mvn could not fetch the connector $artifact (see above)" >&2
    exit 1
  fi
done
# swap the new set in (old jars of another version must not linger on the classpath)
mkdir -p "$dest"
find "$dest" -maxdepth 1 -name '*.jar' -delete
mv "$tmp"/*.jar "$dest"/
if [[ -n "$plugins" ]]; then
  rm -rf "$plugins_dest"
  mkdir -p "$plugins_dest"
  for archive in "$tmp"/plugins/*.tar.gz; do tar -xzf "$archive" -C "$plugins_dest"; done
fi
echo "$want" > "$stamp"
echo "jars: $(ls "$dest"/*.jar | wc -l) jar(s) in $dest" >&2
