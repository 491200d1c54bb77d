// Package reshard checks resharding on Valkey 8 and 9: slots moved with their keys, open slots
// settled, a reshard during an upgrade, a low maxclients (faults mid-move: package reshardfault).
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package reshard

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "reshard")) }
