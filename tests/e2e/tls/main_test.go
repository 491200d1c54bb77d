// Package tls checks TLS: serving with hostnames, invalid Secrets, rotation, expiry warnings, a changed secretRef, resharding over TLS.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package tls

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "tls")) }
