#!/usr/bin/env bash
# Builds helm from the Go module proxy into $CACHE_DIR/bin/helm-<version> (and a `helm` link
# beside it), once per version, and prints the path. The version is the one pinned in
# hack/tools/go.mod: helm is a tool of its own module there, because its k8s.io dependencies
# would fight the operator's k8s.io v0.37 in the main go.mod. No binary is downloaded.
# A cold build takes about 1.5 minutes on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
version=$(awk '$1=="helm.sh/helm/v3"{print $2; exit}' "$here/tools/go.mod")
[ -n "$version" ] || { echo "install-helm: helm.sh/helm/v3 not pinned in hack/tools/go.mod" >&2; exit 1; }
out="$CACHE_DIR/bin/helm-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$CACHE_DIR/bin"
  GOFLAGS=-mod=mod GOWORK=off go -C "$here/tools" build \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=$version" \
    -o "$out.tmp" helm.sh/helm/v3/cmd/helm
  mv "$out.tmp" "$out"
fi
ln -sfn "helm-$version" "$CACHE_DIR/bin/helm"
echo "$out"
