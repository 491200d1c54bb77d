#!/usr/bin/env bash
# Installs the Debian packages the demo and the tests need on a fresh Debian 12 machine:
# valkey-server / valkey-tools 8.0.1 from bookworm-backports (Debian 12 main ships no Valkey),
# iproute2 and util-linux (nsenter, unshare) for the pods' namespaces, jq for the log queries.
# kubectl is not from here: Debian's is 1.20, and hack/build-control-plane.sh builds 1.37.
# Idempotent and quick when everything is already there.
set -euo pipefail

need=()
command -v valkey-server >/dev/null || need+=(valkey-server)
command -v valkey-cli >/dev/null || need+=(valkey-tools)
command -v ip >/dev/null || need+=(iproute2)
command -v jq >/dev/null || need+=(jq)
command -v nsenter >/dev/null || need+=(util-linux)
[ ${#need[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo

if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "adding bookworm-backports to apt sources" >&2
  $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports "${need[@]}"
# The Debian package may start a system valkey-server on 127.0.0.1:6379; the tests run their
# own, one per pod. Stop only that one (its process title names the address), never a pod's.
$SUDO systemctl disable --now valkey-server 2>/dev/null || true
pkill -f '^/usr/bin/valkey-server 127\.0\.0\.1:6379' 2>/dev/null || true
