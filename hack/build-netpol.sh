#!/usr/bin/env bash
# Builds the local cluster's NetworkPolicy enforcer from the Go module proxy into
# $CACHE_DIR/bin/netpol-<version> (and a `netpol` link beside it), once per version, and prints
# the path. It is sigs.k8s.io/kube-network-policies (a Kubernetes SIG project: nftables rules
# and an nfqueue verdict in user space) at the version hack/netpol/go.mod pins, with a main of
# ours (hack/netpol/main.go): the project's own reads in-cluster configuration and names one
# nftables table per machine, where the local clusters side by side need one per node and slot.
# Its own module, because the project pins k8s.io v0.32, not the operator's v0.37. No binary is
# downloaded. tests/localcluster runs it (Options.NetworkPolicies; netpol.go says where it hooks).
# A cold build takes a few minutes on 2 cores (client-go is most of it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
mod=sigs.k8s.io/kube-network-policies
version=$(awk -v m="$mod" '$1==m{print $2; exit}' "$here/netpol/go.mod")
[ -n "$version" ] || { echo "build-netpol: $mod not pinned in hack/netpol/go.mod" >&2; exit 1; }
out="$CACHE_DIR/bin/netpol-$version"
# The main is ours: a changed main.go is a new build of the same version. The key is the files'
# contents only (sha256sum of the files would print their paths too, and every clone in another
# folder would build again).
sum=$(cat "$here/netpol/main.go" "$here/netpol/go.sum" | sha256sum | cut -c1-12)
if [ ! -x "$out" ] || [ "$(cat "$out.src" 2>/dev/null)" != "$sum" ]; then
  mkdir -p "$CACHE_DIR/bin"
  echo "building the NetworkPolicy enforcer ($mod $version) into $out" >&2
  # A file of its own per build, so that two clones building at once do not write one file.
  tmp=$(mktemp "$out.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  GOFLAGS=-mod=mod GOWORK=off go -C "$here/netpol" build -trimpath -o "$tmp" .
  mv "$tmp" "$out"
  echo "$sum" > "$out.src"
fi
ln -sfn "netpol-$version" "$CACHE_DIR/bin/netpol"
echo "$out"
