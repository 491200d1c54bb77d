// Package reshard checks resharding on Valkey 8 and 9: slots moved with their keys, interrupted moves settled, kills during moves, scale-in reverted.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package reshard

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "reshard")) }
