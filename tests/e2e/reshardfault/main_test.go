// Package reshardfault checks faults in the middle of slot moves on Valkey 8 and 9: the operator,
// a move's source or its destination killed mid-move, a scale-in reverted (a drained shard
// wanted again: tests/e2e/handreshard).
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package reshardfault

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "reshardfault")) }
