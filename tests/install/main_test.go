// Package install tests the operator installed the way users install it: `kubectl apply` of
// manifests/ and `helm install` / `helm upgrade` of chart/, on the local cluster, where the
// kubelet runs the Deployment's pod from the operator binary (the image
// gomomento/valkey-operator maps to it). The operator then really is the pod of its
// Deployment: in-cluster configuration, its ServiceAccount's token and nothing more than the
// generated ClusterRole. The contract's commands (`rollout status`, `logs deployment/...`,
// `| jq`) run verbatim in bash.
//
// The render tests need only helm (built into ~/.cache/valkey-operator/bin by
// hack/install-helm.sh when missing); the install tests need the local cluster and are
// skipped with -short.
package install

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestMain(m *testing.M) {
	// envtest (inside localcluster) logs through controller-runtime; this package has nothing
	// to say through it.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error

	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// helmBinary returns helm as pinned in hack/tools/go.mod, building it on first use.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), "hack", "install-helm.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/install-helm.sh: %w\n%s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// operatorBinary builds the operator once, into a directory the pod's non-root user (65532)
// can enter: the kubelet runs it as the Deployment's container.
func operatorBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "valkey-install-bin-"); binErr != nil {
			return
		}
		if binErr = os.Chmod(binDir, 0o755); binErr != nil {
			return
		}
		binPath, binErr = harness.BuildOperator(binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}
