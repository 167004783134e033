#!/usr/bin/env bash
# VPP for the vpp data plane driver and the lab's VPP routers, and srv6pm's VPP plugin built
# against it (docs/VPP.md). No package registry here serves VPP, so it is installed from a
# release build (a .tar.xz of /opt/vpp) when one is found:
#   $SRV6PM_VPP_DIST, else <repo>/../shared/vpp/vpp-26.06-*.tar.xz, else /work/shared/vpp/...
# A VPP already in /opt/vpp (this build, or FD.io's packages installed there) is used as is.
# Then the plugin is built with VPP's development kit into the node manager's package.
set -euo pipefail
VPP_VERSION=26.06
PREFIX=/opt/vpp
here="$(cd "$(dirname "$0")/.." && pwd)"

installed_version() {
  [ -x "$PREFIX/bin/vpp" ] || return 1
  "$PREFIX/bin/vpp" -c /dev/null --version 2>/dev/null | head -1
}

if ! installed_version | grep -q "v$VPP_VERSION"; then
  dist="${SRV6PM_VPP_DIST:-}"
  for candidate in "$here"/../shared/vpp/vpp-"$VPP_VERSION"-*.tar.xz /work/shared/vpp/vpp-"$VPP_VERSION"-*.tar.xz; do
    [ -n "$dist" ] && break
    [ -f "$candidate" ] && dist="$candidate"
  done
  if [ -z "$dist" ] || [ ! -f "$dist" ]; then
    echo "VPP $VPP_VERSION is not in $PREFIX and no release build was found (set SRV6PM_VPP_DIST," >&2
    echo "or install FD.io's packages: docs/VPP.md)" >&2
    exit 1
  fi
  [ "$(id -u)" -eq 0 ] || { echo "installing VPP into $PREFIX needs root" >&2; exit 1; }
  echo "installing VPP $VPP_VERSION from $dist into $PREFIX"
  rm -rf "$PREFIX"
  tar -C "$(dirname "$PREFIX")" -xJf "$dist"
fi

bash "$here/scripts/install-deps.sh" vpp
"$PREFIX/bin/vpp" -c /dev/null --version 2>/dev/null | head -1 || true
