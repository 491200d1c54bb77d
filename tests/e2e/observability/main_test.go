// Package observability checks what the operator tells: the log contract, startup failures, verbosity, metrics scraped by a real Prometheus.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package observability

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "observability")) }
