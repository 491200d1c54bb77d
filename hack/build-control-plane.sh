#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the Go module
# proxy into $CACHE_DIR/k8s-$K8S_VERSION, once per version. No binary is downloaded: there is no
# release download here, so a throwaway module requires k8s.io/kubernetes and replaces each of
# its staging modules (the `=> ./staging/...` block of its go.mod) with the matching v0.x
# release; etcd is built from the same module at the version k8s.io/kubernetes requires.
# A cold build takes several minutes on 2 cores; a warm Go build cache makes it a link step.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
OUT="$CACHE_DIR/k8s-$K8S_VERSION"
BINS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

have_all=1
for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || have_all=0; done
if [ $have_all -eq 1 ]; then echo "$OUT"; exit 0; fi
# On stderr: make deps keeps stdout (the path) quiet, and a cold build is long enough to need saying.
echo "building etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $K8S_VERSION into $OUT (once; a cold build takes 10-25 min on 2 cores)" >&2

staging_version="v0.${K8S_VERSION#v1.}"
work="$CACHE_DIR/build-k8s-$K8S_VERSION"
mkdir -p "$work" "$OUT"
cd "$work"
export GOFLAGS=-mod=mod GOWORK=off

modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$modfile")
go_version=$(awk '$1=="go"{print $2; exit}' "$modfile")

{
  echo "module valkey-operator.local/controlplane"
  echo
  echo "go $go_version"
  echo
  echo "require ("
  echo "  k8s.io/kubernetes $K8S_VERSION"
  echo "  go.etcd.io/etcd/server/v3 $etcd_version"
  echo ")"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#  \1 => \1 '"$staging_version"'#p' "$modfile"
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
go mod tidy >/dev/null 2>&1 || go mod tidy
echo "building control plane $K8S_VERSION (etcd $etcd_version) into $OUT" >&2
go build -trimpath -o "$OUT/etcd" go.etcd.io/etcd/server/v3
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  go build -trimpath -o "$OUT/$b" "k8s.io/kubernetes/cmd/$b"
done
echo "$OUT"
