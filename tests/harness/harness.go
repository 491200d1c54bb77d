// Package harness drives the operator on a local cluster for the end-to-end tests and the
// demo: it installs the CRDs, builds and runs the real operator binary (its stdout captured
// as the log stream), applies manifests and waits on real status.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// RepoRoot is the module's root directory (found from this file's path).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme knows the core kinds and ours.
func Scheme() *kruntime.Scheme {
	s := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	return s
}

// Client returns an admin client of c.
func Client(c *localcluster.Cluster) (client.Client, error) {
	return client.New(c.Config, client.Options{Scheme: Scheme()})
}

// InstallCRDs installs manifests/crds and waits until they are served.
func InstallCRDs(c *localcluster.Cluster) error {
	_, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(RepoRoot(), "manifests", "crds")},
		ErrorIfPathMissing: true,
	})
	return err
}

// BuildOperator builds the operator binary into dir and returns its path.
func BuildOperator(dir string) (string, error) {
	out := filepath.Join(dir, "valkey-operator")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}

// ImpostorImage is an image name reserved for tests: the local kubelet runs tests/cmd/impostor
// (built by StartEnv) for a container of it without a command, where any other image runs Valkey.
// A pod of it answers on Valkey's port what no Valkey would, and logs what it was sent.
const ImpostorImage = "valkey-operator-tests/impostor"

// buildProgram builds the main package at pkg (relative to the repository root) into dir and
// returns the binary's path.
func buildProgram(dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Operator is a running operator process.
type Operator struct {
	cmd    *exec.Cmd
	Stdout string // file with the JSON log stream
	Stderr string
	// MetricsAddr and HealthAddr are where it serves its metrics (HTTPS, Kubernetes
	// authentication) and /healthz, /readyz: free ports of 127.0.0.1, so that several operators
	// (the test packages' and a demo's) run side by side on one host.
	MetricsAddr, HealthAddr string
	// PprofAddr serves Go's /debug/pprof (the --pprof-bind-address flag), for the benchmarks'
	// profiles.
	PprofAddr string
	done      chan struct{}
}

// StartOperator runs binary against c with env (e.g. RUST_LOG=info), its stdout and stderr
// appended to files under dir named after name. name is also the operator's pod name
// (POD_NAME, "local-"+name), which it holds the leader lease by: an operator started again
// under the same name after the last one exited takes the lease back at once, as a container
// restarted in its pod does; operators of different names wait for each other's lease.
func StartOperator(binary string, c *localcluster.Cluster, dir, name string, env ...string) (*Operator, error) {
	o := &Operator{Stdout: filepath.Join(dir, name+".stdout"), Stderr: filepath.Join(dir, name+".stderr"), done: make(chan struct{})}
	var err error
	if o.MetricsAddr, err = freeLoopback(); err != nil {
		return nil, err
	}
	if o.HealthAddr, err = freeLoopback(); err != nil {
		return nil, err
	}
	if o.PprofAddr, err = freeLoopback(); err != nil {
		return nil, err
	}
	stdout, err := os.OpenFile(o.Stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	stderr, err := os.OpenFile(o.Stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(binary, "--metrics-bind-address="+o.MetricsAddr, "--health-probe-bind-address="+o.HealthAddr, "--pprof-bind-address="+o.PprofAddr)
	o.cmd.Env = append(os.Environ(), append([]string{"KUBECONFIG=" + c.Kubeconfig, "POD_NAME=local-" + name}, env...)...)
	o.cmd.Stdout, o.cmd.Stderr = stdout, stderr
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = o.cmd.Wait()
		_ = stdout.Close()
		_ = stderr.Close()
		close(o.done)
	}()
	return o, nil
}

// freeLoopback is an address of 127.0.0.1 with a port free a moment ago.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// Kill stops the operator with sig and waits for it to exit.
func (o *Operator) Kill(sig syscall.Signal) {
	_ = o.cmd.Process.Signal(sig)
	<-o.done
}

// Pid is the operator's process id (for /proc/<pid>/stat and status in benchmarks).
func (o *Operator) Pid() int { return o.cmd.Process.Pid }

// RSS is the operator's resident set in MB (/proc/<pid>/status VmRSS).
func (o *Operator) RSS() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", o.Pid())
}

// Exited reports whether the process has exited, and its exit code.
func (o *Operator) Exited() (bool, int) {
	select {
	case <-o.done:
		return true, o.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// Logs returns the operator's stdout so far.
func (o *Operator) Logs() []byte {
	b, _ := os.ReadFile(o.Stdout)
	return b
}

// EnsureNamespace creates namespace name if it does not exist.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Kubectl runs kubectl against c and returns its combined output.
func Kubectl(c *localcluster.Cluster, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return out, nil
}

// WaitState polls the ValkeyCluster until its status.state is want and its
// observedGeneration is current, and returns it.
func WaitState(ctx context.Context, c client.Client, key client.ObjectKey, want v1.State, timeout time.Duration) (*v1.ValkeyCluster, error) {
	var vc v1.ValkeyCluster
	problem := Poll(ctx, timeout, func() string {
		err := c.Get(ctx, key, &vc)
		if err == nil && vc.Status.State == want && vc.Status.ObservedGeneration == vc.Generation {
			return ""
		}
		return fmt.Sprintf("state %q (message %q), want %q", vc.Status.State, vc.Status.Message, want)
	})
	if problem != "" {
		return &vc, fmt.Errorf("ValkeyCluster %s not %s within %s: %s", key, want, timeout, problem)
	}
	return &vc, nil
}

// Env is what a test package's TestMain sets up for its tests: a work directory, the operator
// binary built into it, a local cluster with the CRDs installed and the operator's namespace,
// and a client of it.
type Env struct {
	WorkDir string
	Binary  string
	Cluster *localcluster.Cluster
	K8s     client.Client
}

// Nodes, when set before Main (in a package's TestMain), are the Kubernetes nodes of the
// package's local cluster instead of localcluster.DefaultNodes: a kubelet policy to test against,
// say.
var Nodes []kubelet.NodeSpec

// EnforceResources, when set before Main, has the package's local cluster enforce its pods' CPU
// and memory limits in cgroups (localcluster.Options.ResourcesOff false), as the demo's does.
// Off by default for the end-to-end packages: with three lanes of local clusters on 2 cores,
// every pod under a CPU quota made the suite slower and its timing-sensitive tests flaky (a
// reshard package 1 105 s instead of 636, liveness probes of the chaos run's pods failing); the
// packages that test resources (config, resize) turn it on.
var EnforceResources bool

// StartEnv builds the operator into a new work directory named after prefix (or takes the binary
// named by $E2E_OPERATOR, built once for many test packages) and starts a local cluster ready for
// it (CRDs, the valkey-operator namespace). On error, what it started is
// stopped again. Stop the cluster with Env.Cluster.Stop.
func StartEnv(ctx context.Context, prefix string) (*Env, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	e := &Env{WorkDir: dir}
	if e.Binary = os.Getenv("E2E_OPERATOR"); e.Binary == "" {
		if e.Binary, err = BuildOperator(dir); err != nil {
			return nil, err
		}
	}
	impostor, err := buildProgram(dir, "./tests/cmd/impostor", "impostor")
	if err != nil {
		return nil, err
	}
	if e.Cluster, err = localcluster.Start(ctx, localcluster.Options{Images: map[string]string{ImpostorImage: impostor}, Nodes: Nodes, ResourcesOff: !EnforceResources}); err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	if err := InstallCRDs(e.Cluster); err != nil {
		_ = e.Cluster.Stop()
		return nil, fmt.Errorf("install CRDs: %w", err)
	}
	if e.K8s, err = Client(e.Cluster); err == nil {
		err = EnsureNamespace(ctx, e.K8s, "valkey-operator")
	}
	if err != nil {
		_ = e.Cluster.Stop()
		return nil, err
	}
	return e, nil
}
