#!/bin/sh
# Run by the compose stack's one-shot service secrets-init (docker-compose.yml), never on the host.
#
#   install-secrets.sh NAME=UID ...
#
# For each NAME, copies /in/tls/NAME/{ca.crt,tls.crt,tls.key} (made on the host by
# scripts/compose-up.sh, keys 0600 owned by whoever ran it) into the volume mounted at
# /out/NAME/tls, owned by UID with the key readable by it alone: the controller runs as 10001 and
# the node managers as root without CAP_DAC_OVERRIDE, so neither could read the host's files.
# If /out/NAME/stamp is mounted, /in/stamp/hmac.key goes there the same way.
set -eu

install_file() {  # SRC DST UID MODE
  rm -f "$2"
  cp "$1" "$2"
  chown "$3:$3" "$2"
  chmod "$4" "$2"
}

install_dir() {  # DIR UID
  chown "$2:$2" "$1"
  chmod 0500 "$1"
}

if [ "$#" -eq 0 ]; then
  echo "usage: install-secrets.sh NAME=UID ..." >&2
  exit 2
fi
for spec in "$@"; do
  name=${spec%%=*}
  uid=${spec#*=}
  src=/in/tls/$name
  out=/out/$name/tls
  for f in ca.crt tls.crt tls.key; do
    if [ ! -f "$src/$f" ]; then
      echo "install-secrets: $src/$f is missing: run scripts/compose-up.sh (make compose-up)" >&2
      exit 1
    fi
  done
  chmod 0700 "$out"  # writable again by root if an earlier run locked it
  install_file "$src/ca.crt" "$out/ca.crt" "$uid" 0444
  install_file "$src/tls.crt" "$out/tls.crt" "$uid" 0444
  install_file "$src/tls.key" "$out/tls.key" "$uid" 0400
  install_dir "$out" "$uid"
  if [ -d "/out/$name/stamp" ]; then
    if [ ! -f /in/stamp/hmac.key ]; then
      echo "install-secrets: /in/stamp/hmac.key is missing: run scripts/compose-up.sh" >&2
      exit 1
    fi
    chmod 0700 "/out/$name/stamp"
    install_file /in/stamp/hmac.key "/out/$name/stamp/hmac.key" "$uid" 0400
    install_dir "/out/$name/stamp" "$uid"
  fi
  echo "install-secrets: $name (uid $uid)"
done
