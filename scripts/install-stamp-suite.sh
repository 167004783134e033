#!/usr/bin/env bash
# Test peers only (make test), not needed by the demo.
set -euo pipefail
# stamp-suite: an independent STAMP implementation (crates.io), the third-party peer of the
# interoperability tests. Built once (~6 min on 2 cores) into a cache reused when present.
STAMP_SUITE_VERSION=1.0.0
STAMP_SUITE_ROOT="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}/stamp-suite"
if ! "$STAMP_SUITE_ROOT/bin/stamp-suite" --version 2>/dev/null | grep -q "$STAMP_SUITE_VERSION"; then
  command -v cargo >/dev/null || { echo "cargo is needed to build stamp-suite (rustup.rs)" >&2; exit 1; }
  echo "building stamp-suite $STAMP_SUITE_VERSION into $STAMP_SUITE_ROOT"
  cargo install --quiet --locked stamp-suite --version "$STAMP_SUITE_VERSION" --root "$STAMP_SUITE_ROOT"
fi
