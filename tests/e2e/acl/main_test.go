// Package acl checks ACL roles and bindings end to end: users, passwords and permissions reach every node, manual changes are reverted; and the rotation of the system users' passwords.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package acl

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "acl")) }
