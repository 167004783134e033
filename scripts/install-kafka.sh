#!/usr/bin/env bash
# A real Kafka broker (KRaft, no ZooKeeper) for tests, the demo and benchmarks: the broker's jars
# from Maven Central (no Kafka tarball is reachable from a registry), cached and reused.
# srv6pm.lab.servers.KafkaServer runs them from the same cache directory.
set -euo pipefail
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
SLF4J_VERSION=2.0.17
LOG4J_VERSION=2.25.3
CACHE="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}"
HOME_DIR="$CACHE/kafka-$KAFKA_VERSION"
LIBS="$HOME_DIR/libs"
# The marker names every pinned version: changing one here rebuilds the directory.
STAMP="kafka_2.13 $KAFKA_VERSION slf4j $SLF4J_VERSION log4j $LOG4J_VERSION"

if [ -f "$LIBS/.complete" ] && [ "$(cat "$LIBS/.complete")" = "$STAMP" ]; then
  echo "kafka $KAFKA_VERSION already installed in $LIBS"
  exit 0
fi

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "java and maven are needed: apt-get install default-jre-headless maven (as root)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends default-jre-headless maven >/dev/null
fi

mkdir -p "$HOME_DIR"
work="$(mktemp -d "$HOME_DIR/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# kafka_2.13 declares slf4j-api 1.7 and no logging backend; the direct slf4j 2 dependency wins
# (nearest first) and log4j-slf4j2-impl binds it to log4j2, the backend Kafka 4 configures.
cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>srv6pm</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId><version>3.8.1</version>
  </plugin></plugins></build>
</project>
EOF
# Maven's own repository lives in the cache too, so one directory is all CI has to keep.
# Its output is kept apart (it prints terminal escapes even with -q) and shown only on failure.
if ! mvn -q -B -Dstyle.color=never -f "$work/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$work/libs" -DincludeScope=runtime \
    >"$work/mvn.log" 2>&1; then
  cat "$work/mvn.log" >&2
  echo "kafka $KAFKA_VERSION: maven could not fetch the jars (log above)" >&2
  exit 1
fi
ls "$work/libs"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null
echo "$STAMP" >"$work/libs/.complete"
rm -rf "$LIBS"
mv "$work/libs" "$LIBS"
echo "kafka $KAFKA_VERSION installed in $LIBS ($(ls "$LIBS" | wc -l) jars, $(du -sh "$LIBS" | cut -f1))"
