#!/usr/bin/env bash
# Telegraf, the collector users would otherwise pick, for bench/results_pipeline.py to measure side
# by side with ours. A slim build (only the Kafka input, the InfluxDB outputs and the line-protocol
# parser) from its Go module, ~35 s with a warm module cache, into a cache reused when present.
set -euo pipefail
TELEGRAF_VERSION=1.39.3  # the newest the Go module proxy serves here
CACHE="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}"
ROOT="$CACHE/telegraf-$TELEGRAF_VERSION"
BIN="$ROOT/bin/telegraf"

if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "$TELEGRAF_VERSION"; then
  echo "telegraf $TELEGRAF_VERSION already installed at $BIN"
  exit 0
fi

GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go  # where go.dev's tarball installs, often not on PATH
fi
if [ -z "$GO" ]; then
  echo "Go is needed to build telegraf $TELEGRAF_VERSION: install it from https://go.dev/dl into /usr/local/go" >&2
  exit 1
fi

# The `custom` tag builds no plugin unless named: the full Telegraf takes several minutes and
# ~250 MB. Telegraf's version is set by ldflags in its own Makefile; without them it reports
# "unknown", so set it here as well (the check above relies on it).
# Module and build caches as in scripts/install-influxdb.sh: inside the cache directory.
mkdir -p "$ROOT/bin"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
tags="custom,inputs.kafka_consumer,outputs.influxdb,outputs.influxdb_v2,parsers.influx"
if ! GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" \
    GOBIN="$ROOT/bin" "$GO" install -tags "$tags" \
    -ldflags "-s -w -X github.com/influxdata/telegraf/internal.Version=$TELEGRAF_VERSION" \
    "github.com/influxdata/telegraf/cmd/telegraf@v$TELEGRAF_VERSION" >"$log" 2>&1; then
  cat "$log" >&2
  echo "telegraf $TELEGRAF_VERSION: go install failed (log above)" >&2
  exit 1
fi
echo "telegraf $TELEGRAF_VERSION installed at $BIN (built with $("$GO" env GOVERSION))"
