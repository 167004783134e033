#!/usr/bin/env bash
# System packages srv6pm builds and runs with (Debian 12). Installs only what is missing.
set -euo pipefail
packages=(clang llvm libbpf-dev bpftool linux-libc-dev iproute2 nftables iputils-ping make
          python3-pip iptables libnetfilter-queue-dev tshark ethtool)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark: no setuid capture helper (tests read files, never capture)
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# stamp-suite: an independent STAMP implementation (crates.io), the third-party peer of the
# interoperability tests. Built once (~6 min on 2 cores) into a cache reused when present.
STAMP_SUITE_VERSION=1.0.0
STAMP_SUITE_ROOT="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}/stamp-suite"
if ! "$STAMP_SUITE_ROOT/bin/stamp-suite" --version 2>/dev/null | grep -q "$STAMP_SUITE_VERSION"; then
  command -v cargo >/dev/null || { echo "cargo is needed to build stamp-suite (rustup.rs)" >&2; exit 1; }
  echo "building stamp-suite $STAMP_SUITE_VERSION into $STAMP_SUITE_ROOT"
  cargo install --quiet --locked stamp-suite --version "$STAMP_SUITE_VERSION" --root "$STAMP_SUITE_ROOT"
fi
