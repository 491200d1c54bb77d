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

.PHONY: all deps packages control-plane build generate manifests lint verify test unit-test demo bench clean

all: build

deps: packages control-plane

packages:
	@bash hack/install-packages.sh

control-plane:
	@CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) bash hack/build-control-plane.sh >/dev/null

build:
	go build -o bin/valkey-operator .

generate:
	go tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/...

manifests:
	go tool controller-gen crd paths=./apis/... output:crd:artifacts:config=manifests/crds

lint:
	go tool golangci-lint run ./...

verify: generate manifests
	git diff --exit-code -- apis manifests

# All tests: unit tests, envtest (real kube-apiserver) and end-to-end tests on the local cluster.
test: deps
	go test -count=1 -timeout 80m ./...

unit-test:
	go test -count=1 -short ./...

demo: deps
	go run ./tests/cmd/localcluster demo

bench: deps
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./tests/...

clean:
	rm -rf bin
