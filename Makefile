# Targets a newcomer can guess. `make demo` and `make test` each do their own set-up on a
# fresh Debian 12 machine (apt packages, control-plane binaries built from the Go module proxy).
SHELL := /bin/bash
CACHE_DIR ?= $(HOME)/.cache/valkey-operator
K8S_VERSION ?= v1.37.2
K8S_BIN := $(CACHE_DIR)/k8s-$(K8S_VERSION)
# envtest and the local cluster find etcd / kube-apiserver / kube-controller-manager /
# kube-scheduler here.
export KUBEBUILDER_ASSETS := $(K8S_BIN)
export GOFLAGS := -mod=mod
# The local cluster runs Valkey 9.1.2 from here for valkey/valkey:9.* images (hack/install-valkey9.sh).
export VALKEY9_DIR := $(CACHE_DIR)/valkey-9.1.2
# kubectl v1.37 is built beside the control plane (Debian's is 1.20); tests and the demo use it.
export PATH := $(K8S_BIN):$(PATH)
# The local cluster's DNS (hack/build-coredns.sh); localcluster finds it through $COREDNS.
COREDNS_VERSION ?= v1.15.0
export COREDNS := $(CACHE_DIR)/bin/coredns-$(COREDNS_VERSION)

.PHONY: all deps packages control-plane coredns netpol helm prometheus chart-lint install-test build generate manifests lint verify test unit-test demo bench chaos clean

all: build

deps: packages control-plane coredns netpol helm prometheus

# Valkey 8.0.1 from bookworm-backports as the system's valkey-server; Valkey 9.1.2 from sid,
# unpacked into $(CACHE_DIR)/valkey-9.1.2 (never installed), for the local cluster's 9.x images.
packages:
	@bash hack/install-packages.sh
	@CACHE_DIR=$(CACHE_DIR) bash hack/install-valkey9.sh >/dev/null

control-plane:
	@CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) bash hack/build-control-plane.sh >/dev/null

# CoreDNS with only the plugins the local cluster uses, built from the Go module proxy into
# $(COREDNS), once per version.
coredns:
	@CACHE_DIR=$(CACHE_DIR) COREDNS_VERSION=$(COREDNS_VERSION) bash hack/build-coredns.sh >/dev/null

# The local cluster's NetworkPolicy enforcer (sigs.k8s.io/kube-network-policies with a main of
# ours), pinned in hack/netpol/go.mod, built into $(NETPOL) once per version; localcluster finds
# it through $NETPOL. The e2e package network and `make bench NETWORK_POLICIES=1` run it.
NETPOL_VERSION ?= v0.8.0
export NETPOL := $(CACHE_DIR)/bin/netpol-$(NETPOL_VERSION)
netpol:
	@CACHE_DIR=$(CACHE_DIR) bash hack/build-netpol.sh >/dev/null

# helm, pinned in hack/tools/go.mod (its own module: helm's k8s.io versions are not ours), built
# into $(CACHE_DIR)/bin. The install tests find it there.
HELM := $(CACHE_DIR)/bin/helm
helm:
	@CACHE_DIR=$(CACHE_DIR) bash hack/install-helm.sh >/dev/null

# promtool and the Prometheus server, pinned in hack/prometheus/go.mod (its own module: its
# dependencies are not ours), built from the Go module proxy into $(CACHE_DIR)/bin once per
# version. tests/monitoring runs $(PROMTOOL) on the alert rules; e2e tests run $(PROMETHEUS).
export PROMTOOL := $(CACHE_DIR)/bin/promtool
export PROMETHEUS := $(CACHE_DIR)/bin/prometheus
prometheus:
	@CACHE_DIR=$(CACHE_DIR) bash hack/build-prometheus.sh >/dev/null

build:
	go build -o bin/valkey-operator .

generate:
	go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/...

manifests:
	go tool controller-gen crd paths=./apis/... output:crd:artifacts:config=manifests/crds
	bash hack/tools/sync-manifests.sh

# --allow-serial-runners: a second lint on the machine waits for the first instead of failing.
lint:
	go tool golangci-lint run --allow-serial-runners ./...

verify: generate manifests
	git diff --exit-code -- apis manifests chart

# All tests: unit tests, envtest (real kube-apiserver) and end-to-end tests on the local cluster,
# the end-to-end packages (tests/e2e/<concern>) run by E2E_LANES lanes side by side, each on its
# own local cluster and operator, longest first (hack/test.sh, hack/e2e-order.txt).
E2E_LANES ?= 3
test: deps
	E2E_LANES=$(E2E_LANES) bash hack/test.sh

# The seeded chaos suite's long run (tests/chaos): three clusters under a schedule of faults and
# day-2 changes made from SEED (random if unset; printed with its replay command), DURATION of
# schedule, then convergence and every acknowledged write read back. The report is printed and
# kept in the work directory. `make test` runs a bounded version: the fixed seed and one random
# seed, printed with its replay command (CHAOS_RANDOM=0 leaves the random one out).
# CHAOS_TIMEOUT covers setup, the schedule and ConvergeBound: raise it with DURATION beyond 30m.
SEED ?=
DURATION ?= 20m
CHAOS_TIMEOUT ?= 60m
chaos: deps
	CHAOS_SEED=$(SEED) CHAOS_DURATION=$(DURATION) go test -count=1 -v -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) ./tests/chaos/

# The chart: lint, and render with the defaults.
chart-lint: helm
	$(HELM) lint --strict chart
	$(HELM) template valkey-operator chart -n valkey-operator >/dev/null

# Installs the operator as users do (kubectl apply of manifests/, helm install / upgrade of
# chart/) on the local cluster, where the operator runs as the pod of its Deployment.
install-test: deps
	go test -count=1 -timeout 60m ./tests/install/

# The packages that need no local cluster (the valkey package starts valkey-server processes).
unit-test:
	go test -count=1 -short . ./apis/... ./fsm/... ./plan/... ./slot/... ./controllers/... ./logging/... ./valkey/... ./metrics/... ./tests/chaos/schedule/...

# Built, then run: `go run` would turn the demo's clean exit on Ctrl-C into exit status 1.
demo: deps
	go build -o bin/localcluster ./tests/cmd/localcluster
	./bin/localcluster demo

# Benchmarks on the local cluster, 3 runs each, reported and never asserted: apply -> Ready
# for 3x1 and 10x1 (pod start, formation, replica sync); a primary killed under write load
# (longest refusal, time back to Ready); 100 clusters of 1x0 in one operator (API writes,
# RSS and CPU per tick, tick intervals, recovery after 50 lose their pod); a 3x1 rolling upgrade
# from Valkey 8.0.1 to 9.1.2 under writes (duration, write errors and longest refusal per shard);
# an ACL change to every node enforcing it, on 8.0.1 and 9.1.2 (render, volume, operator).
# They live in tests/bench; `make test` compiles them and runs none. One at a time: make bench BENCH=Scale100
# The simulated fleet (1 000 and 5 000 clusters on simulated Nodes, SIM_FLEET_SIZES) runs only
# when named: make bench BENCH=SimulatedFleet (about 45 min here; BENCH_TIMEOUT=120m on a
# loaded machine).
BENCH ?= .
BENCH_TIMEOUT ?= 90m
# NETWORK_POLICIES=1 runs the benchmarks' local cluster with its NetworkPolicy enforcer (each
# cluster's policy then really judges its pods' connections): run once with, once without, and
# compare (docs/dev/benchmarks.md).
NETWORK_POLICIES ?= 0
bench: deps
	LOCALCLUSTER_NETWORK_POLICIES=$(NETWORK_POLICIES) go test -run '^$$' -bench '$(BENCH)' -benchtime 3x -timeout $(BENCH_TIMEOUT) ./tests/bench/

clean:
	rm -rf bin
