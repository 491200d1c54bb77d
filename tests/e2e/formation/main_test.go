// Package formation checks how clusters form and go: formation on Valkey 8 and 9, the quickstart of the docs run as written, deletion, Valkey itself checked.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package formation

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "formation")) }
