// Package upgrade checks rolls and upgrades: config and resource rolls, Valkey 8 to 9, replica scaling, stalled rolls reverted, zones changed.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package upgrade

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "upgrade")) }
