#!/usr/bin/env bash
# A real InfluxDB 1.8 server for tests, the demo and benchmarks. Debian ships 1.6.7, which has no
# /api/v2 endpoints (the official influxdb-client cannot write to it); 1.8.10 builds from its Go
# module with Go alone (~1-2 min), into a cache reused when present.
# srv6pm.lab.servers.InfluxServer runs it from the same cache directory.
set -euo pipefail
INFLUXDB_VERSION=1.8.10
CACHE="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}"
ROOT="$CACHE/influxdb-$INFLUXDB_VERSION"
BIN="$ROOT/bin/influxd"

if [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "v$INFLUXDB_VERSION"; then
  echo "influxd $INFLUXDB_VERSION already installed at $BIN"
  exit 0
fi

GO="$(command -v go || true)"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go  # where go.dev's tarball installs, often not on PATH
fi
if [ -z "$GO" ] && [ -x /usr/lib/go-1.19/bin/go ]; then
  GO=/usr/lib/go-1.19/bin/go
fi
if [ -z "$GO" ]; then
  # Debian 12's Go (1.19) builds InfluxDB 1.8 (whose go.mod asks for 1.13).
  [ "$(id -u)" -eq 0 ] || { echo "Go is needed to build influxd $INFLUXDB_VERSION: apt-get install golang-1.19-go (as root)" >&2; exit 1; }
  echo "installing Debian's Go 1.19 to build influxd"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-1.19-go >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-1.19-go >/dev/null; }
  GO=/usr/lib/go-1.19/bin/go
fi

# Module and build caches inside the cache directory: a rebuild reuses them, and nothing is
# written to the user's Go environment. GOTOOLCHAIN=local: build with this Go, never fetch one.
# -modcacherw: the module cache can be deleted like any other directory.
# Go's per-module "downloading" lines are kept apart and shown only on failure.
mkdir -p "$ROOT/bin"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" \
    GOBIN="$ROOT/bin" "$GO" install -ldflags "-s -w -X main.version=$INFLUXDB_VERSION" \
    "github.com/influxdata/influxdb/cmd/influxd@v$INFLUXDB_VERSION" >"$log" 2>&1; then
  cat "$log" >&2
  echo "influxd $INFLUXDB_VERSION: go install failed (log above)" >&2
  exit 1
fi
echo "influxd $INFLUXDB_VERSION installed at $BIN (built with $("$GO" env GOVERSION))"
