// Package bench holds the end-to-end benchmarks (`make bench`): timings of the real operator on
// the local cluster, reported and never asserted. It runs on its own local cluster and operator
// (harness.Main); see docs/dev/benchmarks.md.
package bench

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "bench")) }
