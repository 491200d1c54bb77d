// Package zones checks placement over zones: spread, a whole zone lost, misplaced primaries, node drains against the disruption budgets.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package zones

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "zones")) }
