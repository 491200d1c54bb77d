package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// The environment of the end-to-end test package running in this process, set up by Main: each
// package under tests/e2e (and tests/bench) is its own test binary with its own local cluster and
// operator, so a test that kills or restarts Op touches only its own package's operator.
var (
	// Cluster is this package's local cluster.
	Cluster *localcluster.Cluster
	// K8s is an admin client of Cluster.
	K8s client.Client
	// Op is this package's operator process; RestartOperator replaces it.
	Op *Operator
	// OperatorBinary is the operator binary that Op runs.
	OperatorBinary string
	// WorkDir holds the binary, the operator's logs and anything a test keeps; removed after a
	// run that passed unless E2E_KEEP is set.
	WorkDir string
)

// Main is the TestMain of an end-to-end test package: it starts a local cluster (waiting for a
// free slot, see localcluster.Slots) and the operator, runs the package's tests, stops both and
// returns the exit code for os.Exit. name prefixes the work directory (valkey-e2e-<name>-…).
//
// E2E_RUST_LOG overrides the operator's log level for a run (debug, say); E2E_KEEP=1 keeps the
// operator's log and binary after a run that passed; E2E_OPERATOR names an operator binary
// already built (hack/test.sh builds it once for every package).
func Main(m *testing.M, name string) int {
	ctrllog.SetLogger(logr.Discard()) // envtest's own chatter; the operator's log is what we read
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := StartEnv(ctx, "valkey-e2e-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	WorkDir, OperatorBinary, Cluster, K8s = env.WorkDir, env.Binary, env.Cluster, env.K8s
	if Cluster.NetworkPolicies {
		// Said, so that a benchmark's figures say which local cluster they were measured on.
		fmt.Fprintln(os.Stderr, "local cluster: NetworkPolicies enforced (kube-network-policies on every node)")
	}
	defer func() {
		if Op != nil {
			Op.Kill(syscall.SIGTERM)
		}
		if err := Cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop local cluster:", err)
		}
	}()
	level := "info"
	if l := os.Getenv("E2E_RUST_LOG"); l != "" {
		level = l
	}
	if Op, err = StartOperator(OperatorBinary, Cluster, WorkDir, "operator", "RUST_LOG="+level); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 || os.Getenv("E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "operator log: %s\nlocal cluster logs: %s/logs\n", Op.Stdout, Cluster.Dir)
		if b, err := os.ReadFile(Op.Stdout); err == nil && len(b) > 0 {
			tail := b[max(0, len(b)-8000):]
			fmt.Fprintf(os.Stderr, "--- last operator lines ---\n%s\n", tail)
		}
		_ = os.WriteFile(filepath.Join(WorkDir, "KEEP"), nil, 0o644)
		Cluster.KeepDir()
	} else {
		_ = os.RemoveAll(WorkDir)
	}
	return code
}
