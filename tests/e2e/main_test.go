// Package e2e holds the end-to-end tests: the real operator binary against the local cluster
// (real kube-apiserver, scheduler, garbage collector, and valkey-server processes), checked
// through Kubernetes status and through Valkey itself.
package e2e

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

	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

var (
	cluster  *localcluster.Cluster
	k8s      client.Client
	operator *harness.Operator
	binary   string
	workDir  string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard()) // envtest's own chatter; the operator's log is what we read
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := harness.StartEnv(ctx, "valkey-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	workDir, binary, cluster, k8s = env.WorkDir, env.Binary, env.Cluster, env.K8s
	defer func() {
		if operator != nil {
			operator.Kill(syscall.SIGTERM)
		}
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop local cluster:", err)
		}
	}()
	// E2E_RUST_LOG overrides the operator's log level for a run (debug, say); E2E_KEEP=1 keeps
	// the operator's log and binary after a run that passed.
	level := "info"
	if l := os.Getenv("E2E_RUST_LOG"); l != "" {
		level = l
	}
	if operator, err = harness.StartOperator(binary, cluster, workDir, "operator", "RUST_LOG="+level); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 || os.Getenv("E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "operator log: %s\nlocal cluster logs: %s/logs\n", operator.Stdout, cluster.Dir)
		if b, err := os.ReadFile(operator.Stdout); err == nil && len(b) > 0 {
			tail := b[max(0, len(b)-8000):]
			fmt.Fprintf(os.Stderr, "--- last operator lines ---\n%s\n", tail)
		}
		_ = os.WriteFile(filepath.Join(workDir, "KEEP"), nil, 0o644)
		cluster.KeepDir()
	} else {
		_ = os.RemoveAll(workDir)
	}
	return code
}
