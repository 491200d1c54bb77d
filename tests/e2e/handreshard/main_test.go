// Package handreshard checks a reshard done by hand (valkey-cli --cluster reshard) while the
// operator is stopped: a shard drained of its slots that spec.shards still wants. Its own package
// for the lanes' balance: it is the longest single test of the reshard faults.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package handreshard

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "handreshard")) }
