// Package resize checks what an in-place resize falls back to on nodes that cannot take one: its
// local cluster's kubelets run the static memory manager policy, under which a Guaranteed pod's
// memory cannot change while it runs (the resize is Infeasible), so a memory change replaces the
// nodes as before. The in-place resize itself is checked in package config. It runs on its own
// local cluster and operator (harness.Main); see docs/dev/testing.md.
package resize

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

func TestMain(m *testing.M) {
	harness.EnforceResources = true
	for _, n := range localcluster.DefaultNodes() {
		n.MemoryManagerPolicy = "Static"
		harness.Nodes = append(harness.Nodes, n)
	}
	os.Exit(harness.Main(m, "resize"))
}
