// Package tenancy checks ownership and tenancy: foreign objects neither changed nor trusted, impostor pods, deleted namespaces, the ValkeyNode objects.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package tenancy

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "tenancy")) }
