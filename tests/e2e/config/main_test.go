// Package config checks configuration changes that need no roll: live settings, pass-through directives, pod annotations changed in place.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package config

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) {
	// The in-place resize tests need limits enforced (resize_test.go: an OOM kill at 256Mi).
	harness.EnforceResources = true
	os.Exit(harness.Main(m, "config"))
}
