#!/usr/bin/env bash
# Builds CoreDNS from the Go module proxy into $CACHE_DIR/bin/coredns-$COREDNS_VERSION (and a
# `coredns` link beside it), once per version, and prints the path. The local cluster runs it as
# its cluster DNS (tests/localcluster/dns.go). No binary is downloaded.
#
# Why not `go install github.com/coredns/coredns@$COREDNS_VERSION`: that builds every plugin of
# plugin.cfg, which drags in the AWS, Azure, Google Cloud, Datadog, etcd and OpenTelemetry SDKs
# (hundreds of modules to fetch and compile) for four plugins we use. CoreDNS picks its plugins
# at compile time; without a checkout to run its `go generate` on, the same result is a tiny main
# package in a throwaway module that imports coremain and only the plugins we want, and sets
# dnsserver.Directives to their order from plugin.cfg (what coredns's own generated
# zdirectives.go holds). The code built is the module's, at the pinned version; only the plugin
# list is ours:
#   bind        listen on the slot's gateway address only (three local clusters side by side)
#   errors      log what fails
#   kubernetes  the cluster.local zone from the API server (Services, EndpointSlices, Pods)
#   forward     other names to the host's resolver, as a real cluster's Corefile does
# A cold build takes about a minute or two on 2 cores (client-go is most of it).
set -euo pipefail

COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
CACHE_DIR=${CACHE_DIR:-$HOME/.cache/valkey-operator}
out="$CACHE_DIR/bin/coredns-$COREDNS_VERSION"
if [ ! -x "$out" ]; then
  work="$CACHE_DIR/build-coredns-$COREDNS_VERSION"
  mkdir -p "$work" "$CACHE_DIR/bin"
  cd "$work"
  export GOFLAGS=-mod=mod GOWORK=off
  modfile=$(go mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  go_version=$(awk '$1=="go"{print $2; exit}' "$modfile")
  cat > go.mod <<EOF
module valkey-operator.local/coredns

go $go_version

require github.com/coredns/coredns $COREDNS_VERSION
EOF
  cat > main.go <<'GO'
// The local cluster's CoreDNS: coredns's own main (coredns.go) with only the plugins it needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	// The order of plugin.cfg (core/dnsserver/zdirectives.go), reduced to these four.
	dnsserver.Directives = []string{"bind", "errors", "kubernetes", "forward"}
}

func main() { coremain.Run() }
GO
  go mod tidy >/dev/null 2>&1 || go mod tidy
  echo "building coredns $COREDNS_VERSION into $out" >&2
  go build -trimpath -o "$out.tmp" .
  mv "$out.tmp" "$out"
fi
ln -sfn "coredns-$COREDNS_VERSION" "$CACHE_DIR/bin/coredns"
echo "$out"
