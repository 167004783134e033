#!/usr/bin/env bash
# System packages srv6pm builds and runs with (Debian 12). Installs only what is missing.
#   install-deps.sh demo   what `make demo` runs: eBPF toolchain, iproute2, nftables, ip6tables
#   install-deps.sh        everything `make test` needs as well (tshark, ethtool, PostgreSQL, ...)
#   install-deps.sh vpp    VPP's runtime libraries and what builds srv6pm's VPP plugin only
#                          (scripts/install-vpp.sh)
set -euo pipefail
profile="${1:-all}"
# The demo: compile the eBPF programs (clang, llvm, libbpf headers), load them (bpftool), build the
# lab (iproute2, ping), drop (nftables) and delay (ip6tables to an NFQUEUE, libnetfilter-queue for
# the Python binding, built with gcc) packets, pip and venv for the packages.
packages=(clang llvm libbpf-dev bpftool linux-libc-dev iproute2 iputils-ping nftables iptables
          libnetfilter-queue-dev gcc make python3-pip python3-dev python3-venv)
case "$profile" in
  demo) ;;
  # Tests: packets decoded by Wireshark's dissectors, offloads switched, a real PostgreSQL, the
  # shell scripts linted.
  all) packages+=(tshark ethtool postgresql shellcheck) ;;
  # VPP's runtime libraries; cmake, ninja and vppapigen's ply build the plugin
  vpp) packages=(libssl3 liblzma5 libnl-3-200 libnl-route-3-200 libunwind8 cmake ninja-build python3-ply) ;;
  *) echo "usage: $0 [demo|all|vpp]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "missing Debian packages (install them as root): ${missing[*]}" >&2; exit 1; }
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark: no setuid capture helper (tests read files, never capture)
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
