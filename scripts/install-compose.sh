#!/usr/bin/env bash
# The Docker Compose CLI (v5, the `docker compose` plugin), for tests/test_compose.py: its own
# loader (`docker-compose config`) checks what the compose JSON schema cannot: references to
# services, networks and volumes, interpolation, merges. No Docker engine is needed for that,
# and none is installed. No compose binary is reachable from a registry here, so it is built
# from its Go module source (~1 min on 2 cores) into a cache reused when present.
set -euo pipefail
# 5.6.0: the newest release this machine's Go (1.26.8) builds; 5.7.0 asks for Go 1.26.10.
COMPOSE_VERSION="${COMPOSE_VERSION:-5.6.0}"
CACHE="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}"
BIN="$CACHE/compose-$COMPOSE_VERSION/bin"

if [ -x "$BIN/docker-compose" ] && [ "$(cat "$BIN/.complete" 2>/dev/null)" = "$COMPOSE_VERSION" ]; then
  echo "docker-compose $COMPOSE_VERSION already installed in $BIN"
  exit 0
fi

GO=/usr/local/go/bin/go  # go.dev's tarball; Debian's go is too old for compose
if [ ! -x "$GO" ]; then
  echo "Go is needed to build docker-compose $COMPOSE_VERSION: install it from https://go.dev/dl into /usr/local/go" >&2
  exit 1
fi

# Own module and build caches, dropped after the build (only the binary is reused); no go
# toolchain download (GOTOOLCHAIN=local); static binary (CGO_ENABLED=0).
GOENV_DIR="$CACHE/go-compose"
export GOTOOLCHAIN=local GOFLAGS="-mod=mod -modcacherw" CGO_ENABLED=0
export GOMODCACHE="$GOENV_DIR/mod" GOCACHE="$GOENV_DIR/build"
mkdir -p "$BIN"
work="$(mktemp -d "$CACHE/compose-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log="$work/go.log"

# `go install` refuses a module with replace directives: build from a copy of its source.
if ! dir="$("$GO" mod download -json "github.com/docker/compose/v5@v$COMPOSE_VERSION" 2>>"$log" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || [ -z "$dir" ]; then
  cat "$log" >&2
  echo "downloading docker/compose v$COMPOSE_VERSION failed" >&2
  exit 1
fi
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
if ! (cd "$work/src" && "$GO" build -trimpath \
    -ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=v$COMPOSE_VERSION" \
    -o "$work/docker-compose" ./cmd) >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "building docker-compose $COMPOSE_VERSION failed" >&2
  exit 1
fi
mv "$work/docker-compose" "$BIN/docker-compose"
echo "$COMPOSE_VERSION" >"$BIN/.complete"
rm -rf "$GOENV_DIR"
echo "docker-compose $COMPOSE_VERSION installed in $BIN ($("$BIN/docker-compose" version --short))"
