// Package heal checks healing: failed, hung and lost pods replaced, lost shards served again, takeover after quorum loss.
// It runs on its own local cluster and operator (harness.Main); see docs/dev/testing.md.
package heal

import (
	"os"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, "heal")) }
