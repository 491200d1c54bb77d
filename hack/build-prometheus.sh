#!/usr/bin/env bash
# Builds promtool and the Prometheus server from the Go module proxy into
# $CACHE_DIR/bin/promtool-<version> and $CACHE_DIR/bin/prometheus-<version> (and `promtool` /
# `prometheus` links beside them), once per version, and prints both paths, promtool first. The
# version is the one pinned in hack/prometheus/go.mod: its own module, because Prometheus's
# dependencies (client-go, the cloud SDKs of its service discovery) would fight the operator's
# k8s.io v0.37 in the main go.mod. No binary is downloaded.
#
# promtool checks and unit-tests the alert rules of chart/files/alerts.yaml (tests/monitoring).
# The server is for a test that scrapes the operator and evaluates those rules through its HTTP
# API. The build differs from a release's (.promu.yml) in two tags, both Prometheus's own:
# - no `builtinassets`: release builds embed the web UI, whose assets an npm build generates and
#   the module does not ship. Without the tag the server serves the UI from disk (there is none
#   here, so the UI pages 404); its API works the same, which is all a test needs.
# - `remove_all_sd,enable_kubernetes_sd`: service discovery is static, file, http and kubernetes
#   only. The cloud providers' SDKs (AWS, Azure, GCE, Nomad, Consul, ...) were two thirds of the
#   compile time and no test discovers targets there. promtool refuses a config that uses them.
# A cold build (empty module and build caches, both binaries) takes about 6 minutes on 2 cores,
# downloads included (8 CPU-minutes; with every service discovery, 17).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
mod=github.com/prometheus/prometheus
module_version=$(awk -v m="$mod" '$1==m{print $2; exit}' "$here/prometheus/go.mod")
[ -n "$module_version" ] || { echo "build-prometheus: $mod not pinned in hack/prometheus/go.mod" >&2; exit 1; }
# The module's v0.MMM.P is Prometheus M.MM.P (v0.316.0 is 3.16.0); the binaries say the latter.
version=$(awk -v v="${module_version#v0.}" 'BEGIN{split(v, p, "."); printf "%d.%d.%s", int(p[1]/100), p[1]%100, p[2]}')
for tool in promtool prometheus; do
  out="$CACHE_DIR/bin/$tool-$version"
  if [ ! -x "$out" ]; then
    mkdir -p "$CACHE_DIR/bin"
    echo "building $tool $version into $out" >&2
    GOFLAGS=-mod=mod GOWORK=off go -C "$here/prometheus" build -trimpath -tags netgo,remove_all_sd,enable_kubernetes_sd \
      -ldflags "-X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$module_version" \
      -o "$out.tmp" "$mod/cmd/$tool"
    mv "$out.tmp" "$out"
  fi
  ln -sfn "$tool-$version" "$CACHE_DIR/bin/$tool"
  echo "$out"
done
