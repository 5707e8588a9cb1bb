#!/usr/bin/env bash
# Fetch the JVM jars limno's Spark pipeline passes to Spark (spark.jars) from Maven
# Central into a git-ignored cache: .cache/jars/ (or $LIMNO_SPARK_JARS_DIR).
# What is fetched is scripts/jars/pom.xml's dependencies (hadoop-aws matching the
# Hadoop inside the pinned PySpark, and its AWS SDK v2 bundle).
# Idempotent: does nothing when the pom and this script are unchanged since the
# last successful run. Needs Java and Maven (`mvn`) on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${LIMNO_SPARK_JARS_DIR:-.cache/jars}
stamp="$dest/.stamp"
want=$(cat scripts/jars/pom.xml scripts/jars.sh | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "error: jars.sh needs Maven (mvn) to fetch the Spark jars (e.g. apt-get install maven)" >&2
  exit 1
fi
echo "jars: fetching Spark jars from Maven Central into $dest" >&2
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$tmp/mvn.log"
if ! mvn -q -B -Dstyle.color=never -f scripts/jars/pom.xml \
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DoutputDirectory="$(cd "$tmp" && pwd)" -DincludeScope=runtime >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: mvn could not fetch the Spark jars (see above)" >&2
  exit 1
fi
# swap the new set in (old jars of another version must not linger on the classpath)
mkdir -p "$dest"
find "$dest" -maxdepth 1 -name '*.jar' -delete
mv "$tmp"/*.jar "$dest"/
echo "$want" > "$stamp"
echo "jars: $(ls "$dest"/*.jar | wc -l) jar(s) in $dest" >&2
