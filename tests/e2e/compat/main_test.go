// Package compat checks that clusters made by an earlier version of this operator keep working,
// untouched, when the operator is upgraded over them: the objects the original names are brought
// to its names in place, and no pod is replaced for it.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package compat

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "compat")) }
