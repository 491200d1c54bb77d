// Package network checks the NetworkPolicy every ValkeyCluster gets ({cluster}-network) with a
// real enforcer on the local cluster (sigs.k8s.io/kube-network-policies, one per Node:
// tests/localcluster/netpol.go): strangers cannot reach the cluster bus, their CLUSTER MEET adds
// nothing, the cluster's own pods still gossip, fail over and reshard, and turning the policy off
// lets the stranger in again. It runs on its own local cluster and operator (harness.Main); see
// docs/dev/testing.md.
package network

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) {
	// The enforcer runs on this package's local cluster only (Options.NetworkPolicies).
	_ = os.Setenv("LOCALCLUSTER_NETWORK_POLICIES", "1")
	os.Exit(harness.Main(m, "network"))
}
