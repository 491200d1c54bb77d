// Package failover checks failover under load: primaries killed, deleted, cut off or stopped with their node, quorum lost, with the operator up or down.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package failover

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "failover")) }
