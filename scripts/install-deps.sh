#!/usr/bin/env bash
# System packages srv6pm builds and runs with (Debian 12). Installs only what is missing.
set -euo pipefail
packages=(clang llvm libbpf-dev bpftool linux-libc-dev iproute2 nftables iputils-ping make
          python3-pip iptables libnetfilter-queue-dev tshark ethtool postgresql shellcheck)
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

