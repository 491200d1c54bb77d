// Package chaos is the seeded chaos suite: several Valkey clusters on one local cluster, a
// writer on each, and a schedule (package schedule) of faults and day-2 changes made from a seed
// before the run. At the end every cluster must converge to its final spec within a stated bound
// and every write a replica acknowledged must read back. It has its own local cluster and
// operator, so `go test ./...` runs it beside tests/e2e.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
	cluster *localcluster.Cluster
	k8s     client.Client
	workDir string
	op      operator
)

// operator is the one operator process, killed and restarted by the schedule.
type operator struct {
	mu     sync.Mutex
	binary string
	proc   *harness.Operator
}

// restart SIGKILLs the operator, waits `down`, and starts a new one appending to the same log.
func (o *operator) restart(down time.Duration) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.proc.Kill(syscall.SIGKILL)
	time.Sleep(down)
	return o.start()
}

func (o *operator) start() error {
	p, err := harness.StartOperator(o.binary, cluster, workDir, "operator", "RUST_LOG=info")
	if err != nil {
		return fmt.Errorf("start operator: %w", err)
	}
	o.proc = p
	return nil
}

func (o *operator) logPath() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proc.Stdout
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	flag.Parse()
	if testing.Short() {
		return m.Run() // the schedule's unit tests live in ./schedule; nothing here runs short
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := harness.StartEnv(ctx, "valkey-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	workDir, op.binary, cluster, k8s = env.WorkDir, env.Binary, env.Cluster, env.K8s
	defer func() {
		op.mu.Lock()
		if op.proc != nil {
			op.proc.Kill(syscall.SIGTERM)
		}
		op.mu.Unlock()
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop local cluster:", err)
		}
	}()
	if err := op.start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	// The reports and the operator's log stay for reading; the binary goes.
	_ = os.Remove(filepath.Join(workDir, "valkey-operator"))
	fmt.Fprintf(os.Stderr, "chaos reports and operator log: %s (local cluster logs: %s/logs, removed with the cluster)\n", workDir, cluster.Dir)
	return code
}
