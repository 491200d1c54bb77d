#!/usr/bin/env bash
# Installs the Debian packages the demo and the tests need on a fresh Debian 12 machine:
# valkey-server / valkey-tools 8.0.1 from bookworm-backports (Debian 12 main ships no Valkey),
# iproute2 for the pod network namespaces, jq for the log queries. Idempotent and quick when
# everything is already there.
set -euo pipefail

need=()
command -v valkey-server >/dev/null || need+=(valkey-server)
command -v valkey-cli >/dev/null || need+=(valkey-tools)
command -v ip >/dev/null || need+=(iproute2)
command -v jq >/dev/null || need+=(jq)
command -v nsenter >/dev/null || need+=(util-linux)
command -v kubectl >/dev/null || need+=(kubernetes-client)
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
# The Debian package starts a system valkey-server on 127.0.0.1:6379; the tests run their own.
$SUDO systemctl disable --now valkey-server 2>/dev/null || true
pkill -x valkey-server 2>/dev/null || true
