#!/usr/bin/env bash
# The whole srv6pm stack with Docker Compose, in one command (`make compose-up`; docs/DEPLOY.md):
#   1. if missing, the stack's PKI in deploy/compose/tls/ (one folder per service with ca.crt,
#      tls.crt, tls.key, made by `srv6pm pki`) and the STAMP HMAC key in deploy/compose/stamp/;
#   2. if missing, .env with random secrets (the controller's bootstrap admin token, InfluxDB's
#      and Grafana's passwords); it stays on this machine (.gitignore);
#   3. docker compose up -d --build --wait: images built, every health check passed;
#   4. the lab r1 - r2 - r3 registered with the controller through the srv6pm CLI inside the
#      controller's container: nodes, SIDs, the policies to-r3 / to-r1, the session r1-r3;
#   5. what to open, and where the token is.
# Running it again changes nothing that exists: files are kept, objects already registered are
# left alone. Delete deploy/compose/tls/ (and `docker compose down -v`) to start afresh.
#
# Needs a Linux Docker host (Docker Engine with the compose plugin, IPv6 networks, bpffs mounted
# at /sys/fs/bpf) and python3. The PKI is made by this machine's `srv6pm pki` if the srv6pm CLI
# is installed (pip install ./common ./cli), else by the one in the controller's image. CI has no
# Docker engine, so this script never runs there: tests/test_compose.py checks the compose file,
# the settings and the addresses it relies on, cli/tests/test_cli_pki.py the certificates
# `srv6pm pki` makes, and shellcheck this script.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUTERS=(r1 r2 r3)
TLS_DIR=deploy/compose/tls
STAMP_KEY=deploy/compose/stamp/hmac.key
ENV_FILE=.env

die() {
  echo "compose-up: $*" >&2
  exit 1
}

if ! docker compose version >/dev/null 2>&1; then
  die "\`docker compose version\` failed: this needs Docker Engine with the compose plugin" \
    "(https://docs.docker.com/engine/install/); see docs/DEPLOY.md"
fi
if ! docker info >/dev/null 2>&1; then
  die "the Docker daemon does not answer (\`docker info\` failed): is it running, and may" \
    "this user use it (the docker group)?"
fi
if ! command -v python3 >/dev/null 2>&1; then
  die "python3 is needed to make the secrets (apt-get install python3)"
fi
if [[ $(uname -s) == Linux && $(stat -f -c %T /sys/fs/bpf 2>/dev/null) != bpf_fs ]]; then
  echo "compose-up: warning: no bpffs at /sys/fs/bpf on this machine; if it is the Docker" \
    "host, mount it first: mount -t bpf bpf /sys/fs/bpf" >&2
fi

secret_hex() {  # OCTETS
  python3 -c 'import secrets, sys; print(secrets.token_hex(int(sys.argv[1])))' "$1"
}

pki_complete() {
  local name file
  for name in controller "${ROUTERS[@]}"; do
    for file in ca.crt tls.crt tls.key; do
      [[ -f $TLS_DIR/$name/$file ]] || return 1
    done
  done
}

pki() {  # srv6pm pki ARGS..., paths relative to the repository
  if srv6pm pki --help >/dev/null 2>&1; then
    srv6pm pki "$@"
  else
    # the controller's image has the CLI; run as this user, so the files are this user's
    docker compose build controller >/dev/null
    docker compose run --rm --no-deps -T --user "$(id -u):$(id -g)" -e HOME=/tmp \
      -v "$PWD:/repo" -w /repo --entrypoint srv6pm controller pki "$@"
  fi
}

if ! pki_complete; then
  # one CA signs everything and its key is not kept: a partial PKI is made again whole
  echo "compose-up: making the stack's PKI in $TLS_DIR (srv6pm pki)"
  rm -rf "$TLS_DIR"
  CA_DIR=$(mktemp -d deploy/compose/.ca.XXXXXX)
  trap 'rm -rf "$CA_DIR"' EXIT
  pki init --dir "$CA_DIR" --ca-name "srv6pm compose CA" >/dev/null
  pki issue controller --dir "$CA_DIR" --out "$TLS_DIR" --role controller >/dev/null
  for router in "${ROUTERS[@]}"; do
    # the controller reaches each node manager by its name (the endpoints below)
    pki issue "$router" --dir "$CA_DIR" --out "$TLS_DIR" --role node-manager >/dev/null
  done
  rm -rf "$CA_DIR"
  trap - EXIT
fi

if [[ ! -f $STAMP_KEY ]]; then
  echo "compose-up: making the STAMP HMAC key $STAMP_KEY"
  (umask 077 && mkdir -p "$(dirname "$STAMP_KEY")" && secret_hex 32 >"$STAMP_KEY")
fi

if [[ ! -f $ENV_FILE ]]; then
  echo "compose-up: making $ENV_FILE with random secrets"
  (
    umask 077
    {
      echo "# Secrets of the compose stack, made by scripts/compose-up.sh. Never commit this file."
      echo "# InfluxDB takes its passwords on its first start only (an empty volume)."
      echo "SRV6PM_BOOTSTRAP_TOKEN=s6pm_$(secret_hex 32)"
      echo "INFLUXDB_ADMIN_PASSWORD=$(secret_hex 24)"
      echo "INFLUXDB_WRITE_PASSWORD=$(secret_hex 24)"
      echo "INFLUXDB_READ_PASSWORD=$(secret_hex 24)"
      echo "GRAFANA_ADMIN_PASSWORD=$(secret_hex 16)"
    } >"$ENV_FILE"
  )
fi

echo "compose-up: building the images and starting the stack (first build: several minutes)"
if ! docker compose up -d --build --wait; then
  die "the stack did not become healthy: see \`docker compose ps\` and" \
    "\`docker compose logs SERVICE\`"
fi

cli() {
  # The controller's own bootstrap admin token, read inside its container: it is never on a
  # command line.
  # shellcheck disable=SC2016  # expanded by the container's shell
  docker compose exec -T controller \
    sh -c 'SRV6PM_TOKEN="$SRV6PM_BOOTSTRAP_TOKEN" exec srv6pm "$@"' srv6pm "$@"
}

ensure() {  # KIND NAME ADD-OPTIONS...: added unless it exists
  local kind=$1 name=$2
  shift 2
  if cli "$kind" show "$name" >/dev/null 2>&1; then
    echo "compose-up: $kind $name is already there"
  else
    cli "$kind" add "$name" "$@"
  fi
}

echo "compose-up: registering the lab with the controller"
# The node managers' certificates name r1, r2, r3: the endpoints must too (mutual TLS).
# STAMP probes and replies use each router's address on its link toward r2 (r2's toward r1).
ensure nodes r1 --endpoint r1:50051 --probe-address fd00:12::11
ensure nodes r2 --endpoint r2:50051 --probe-address fd00:12::12
ensure nodes r3 --endpoint r3:50051 --probe-address fd00:23::13
# One locator per router, fc00:0:N::/48, routed by each container's static routes.
ensure sids fc00:0:1::d6 --node r1 --behaviour End.DT6
ensure sids fc00:0:2::e --node r2 --behaviour End
ensure sids fc00:0:3::d6 --node r3 --behaviour End.DT6
# Each head-end steers the far link's subnet through r2.
ensure policies to-r3 --head r1 --tail r3 --segment fc00:0:2::e --segment fc00:0:3::d6 \
  --prefix fd00:23::/64
ensure policies to-r1 --head r3 --tail r1 --segment fc00:0:2::e --segment fc00:0:1::d6 \
  --prefix fd00:12::/64
# --wait: until every node has applied it (an error names the node and why).
ensure sessions r1-r3 --policy to-r3 --return-policy to-r1 --wait

cat <<'EOF'

srv6pm is up: routers r1 - r2 - r3, session r1-r3 measuring loss and delay both ways.

  Grafana   http://localhost:3000          user admin, password GRAFANA_ADMIN_PASSWORD in .env
  REST API  http://localhost:8080/docs     admin token SRV6PM_BOOTSTRAP_TOKEN in .env

The srv6pm CLI on this machine (pip install -e ./cli), with the admin token:
  export SRV6PM_URL=http://localhost:8080
  export SRV6PM_TOKEN="$(sed -n 's/^SRV6PM_BOOTSTRAP_TOKEN=//p' .env)"
  srv6pm results watch r1-r3
or inside the controller's container:
  docker compose exec controller sh -c 'SRV6PM_TOKEN=$SRV6PM_BOOTSTRAP_TOKEN srv6pm results watch r1-r3'

Stop: make compose-down (volumes are kept; `docker compose down -v` removes them too).
EOF
