#!/usr/bin/env bash
# A real Kubernetes API server (etcd + kube-apiserver) with kubectl and helm, for the tests that
# install the Helm chart with server-side validation. No Docker, kind or envtest downloads are
# reachable here, so everything is built from Go module sources (~5 min cold on 2 cores, 1.7 GB
# of RAM at peak), into a cache reused when present.
# srv6pm.lab.kube.KubeApiServer runs them from the same cache directory.
set -euo pipefail
ETCD_VERSION="${ETCD_VERSION:-3.6.8}"
KUBE_VERSION="${KUBE_VERSION:-1.34.4}"
HELM_VERSION="${HELM_VERSION:-3.22.0}"
CACHE="${SRV6PM_CACHE:-$HOME/.cache/srv6pm}"
ROOT="$CACHE/kube-$KUBE_VERSION"
BIN="$ROOT/bin"
# The marker names every pinned version: changing one rebuilds the directory.
STAMP="etcd $ETCD_VERSION kubernetes $KUBE_VERSION helm $HELM_VERSION"

if [ -f "$BIN/.complete" ] && [ "$(cat "$BIN/.complete")" = "$STAMP" ]; then
  echo "etcd $ETCD_VERSION, kube-apiserver/kubectl $KUBE_VERSION, helm $HELM_VERSION already installed in $BIN"
  exit 0
fi

GO="$(command -v go || true)"
if [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go  # go.dev's tarball; a distribution's go is often too old for Kubernetes
fi
if [ -z "$GO" ]; then
  echo "Go is needed to build kube-apiserver $KUBE_VERSION: install it from https://go.dev/dl into /usr/local/go" >&2
  exit 1
fi

# Module and build caches of their own inside the cache directory: nothing is written to the
# user's Go environment, and both are dropped after a successful build (4 GB; only the binaries
# are reused). GOTOOLCHAIN=local: build with this Go, never fetch one. -mod=mod: the edited
# go.mod files below need their go.sum completed. -modcacherw: the module cache can be removed
# with rm. CGO_ENABLED=0: static binaries, no C toolchain needed.
GOENV_DIR="$CACHE/go-kube"
export GOTOOLCHAIN=local GOFLAGS="-mod=mod -modcacherw" CGO_ENABLED=0
export GOMODCACHE="$GOENV_DIR/mod" GOCACHE="$GOENV_DIR/build"

mkdir -p "$ROOT"
work="$(mktemp -d "$ROOT/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
log="$work/go.log"

# Go's per-module "downloading" lines are kept apart and shown only on failure.
run() {
  local what="$1"
  shift
  if ! "$@" >>"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "$what failed (log above)" >&2
    exit 1
  fi
}

# One field (Dir, GoMod) of a module downloaded through the module proxy.
module_path() {
  local module="$1" field="$2"
  run "go mod download $module" "$GO" mod download -json "$module"
  "$GO" mod download -json "$module" | sed -n "s/^[[:space:]]*\"$field\": \"\(.*\)\",\{0,1\}\$/\1/p"
}

# A module's source, copied where its go.mod can be edited.
module_source() {
  local module="$1" dest="$2" dir
  dir="$(module_path "$module" Dir)"
  [ -d "$dir" ] || { echo "no source directory for $module" >&2; exit 1; }
  cp -r "$dir" "$dest"
  chmod -R u+w "$dest"
}

start=$SECONDS

# etcd: go install refuses the server module (its go.mod replaces its sibling modules with
# relative paths); without those replaces the siblings come from the proxy at the same version.
module_source "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" "$work/etcd"
for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
  "$GO" -C "$work/etcd" mod edit -dropreplace="go.etcd.io/etcd/$m"
done
run "etcd $ETCD_VERSION build" "$GO" -C "$work/etcd" build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" .
echo "etcd $ETCD_VERSION built ($((SECONDS - start)) s)"

# Kubernetes: the k8s.io/kubernetes module zip has no staging/ tree, so its go.work and its
# "=> ./staging/src/k8s.io/..." replaces point nowhere. Each staging module is published on its
# own as v0.<minor>.<patch>: require that instead of the v0.0.0 placeholder.
STAGING_VERSION="v0.${KUBE_VERSION#*.}"
module_source "k8s.io/kubernetes@v$KUBE_VERSION" "$work/kubernetes"
(
  cd "$work/kubernetes"
  rm -f go.work go.work.sum
  staged="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' go.mod)"
  [ -n "$staged" ] || { echo "k8s.io/kubernetes $KUBE_VERSION: no staging replaces found in go.mod" >&2; exit 1; }
  edits=()
  for m in $staged; do
    edits+=("-dropreplace=$m")
    # sample-cli-plugin and sample-controller are replaced but never required: only drop those.
    if grep -Eq "^[[:space:]]*$m v0\.0\.0([[:space:]]|$)" go.mod; then
      edits+=("-require=$m@$STAGING_VERSION")
    fi
  done
  "$GO" mod edit "${edits[@]}"
  if grep -q '=> \./staging/' go.mod; then
    echo "k8s.io/kubernetes $KUBE_VERSION: staging replaces left in go.mod" >&2
    exit 1
  fi
)
# Without these the binaries report v0.0.0 (the server on /version, kubectl as a client).
major="${KUBE_VERSION%%.*}"
minor="${KUBE_VERSION#*.}"
minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done
for cmd in kube-apiserver kubectl; do
  run "$cmd $KUBE_VERSION build" \
    "$GO" -C "$work/kubernetes" build -trimpath -ldflags "$ldflags" -o "$work/bin/$cmd" "./cmd/$cmd"
  echo "$cmd $KUBE_VERSION built ($((SECONDS - start)) s)"
done

# helm builds with go install as it is. Its version and the Kubernetes version it assumes with no
# cluster (helm template, lint) are set as its Makefile does, from the client-go it requires.
helm_gomod="$(module_path "helm.sh/helm/v3@v$HELM_VERSION" GoMod)"
helm_k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$helm_gomod")"
[ -n "$helm_k8s_minor" ] || { echo "helm $HELM_VERSION: no k8s.io/client-go in $helm_gomod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_k8s_minor"
done
run "helm $HELM_VERSION build" \
  env GOBIN="$work/bin" "$GO" install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
echo "helm $HELM_VERSION built ($((SECONDS - start)) s)"

# Each binary must report its pinned version (a wrong -X path is silently ignored by the linker).
reports() {
  local want="$1" out
  shift
  out="$("$@" 2>&1)" || true
  [[ "$out" == *"$want"* ]] || { echo "$* reports '$out', not $want" >&2; exit 1; }
}
reports "etcd Version: $ETCD_VERSION" "$work/bin/etcd" --version
reports "v$KUBE_VERSION" "$work/bin/kube-apiserver" --version
reports "v$KUBE_VERSION" "$work/bin/kubectl" version --client
reports "v$HELM_VERSION" "$work/bin/helm" version --short
echo "$STAMP" >"$work/bin/.complete"
rm -rf "$BIN"
mv "$work/bin" "$BIN"
rm -rf "$GOENV_DIR"
echo "installed in $BIN in $((SECONDS - start)) s with $("$GO" env GOVERSION): $(cd "$BIN" && du -sh etcd kube-apiserver kubectl helm | tr '\t\n' ': ')"
