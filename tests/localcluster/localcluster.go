// Package localcluster runs a small but real Kubernetes on this machine for the demo and the
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from
// the Go module proxy (hack/build-control-plane.sh), CoreDNS as the cluster DNS
// (hack/build-coredns.sh, dns.go), plus the project's own kubelet
// (package kubelet) that registers zoned Nodes and runs the Pods bound to them as real local
// processes (valkey-server), each with its own network namespace and pod IP. The image's tag
// chooses the Valkey: 8.0.1 (the host's) for valkey/valkey:8.*, 9.1.2 for valkey/valkey:9.*.
//
// Nothing here is a fake: the API server, the scheduler's decisions, garbage collection of
// owned objects and the Valkey processes are the real programs. Only one local cluster runs on
// a machine per slot (see Slots); Start waits for a free slot, so parallel test packages
// take turns beyond that.
package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// K8sVersion is the Kubernetes release whose control plane the local cluster runs.
const K8sVersion = "v1.37.2"

// Slots lets a few local clusters run side by side on one machine (a demo left running while
// the tests run, say). Slot i owns bridge vko<i> and pods on 10.(244+i).0.0/16, the host (and
// the API server and the cluster DNS, for pods that talk to them) at 10.(244+i).0.1. A slot is
// held through a lock file; Start takes the highest free one and waits when none is.
const Slots = 8

// slotNetwork is the pod network of slot i.
func slotNetwork(i int) kubelet.NetworkConfig {
	return kubelet.NetworkConfig{
		Bridge:  fmt.Sprintf("vko%d", i),
		CIDR:    fmt.Sprintf("10.%d.0.0/16", 244+i),
		Gateway: fmt.Sprintf("10.%d.0.1", 244+i),
	}
}

// lockFile is slot i's lock. Slot 0's is also taken by the kubelet package's own tests, whose
// network sits inside slot 0's range.
func lockFile(i int) string {
	if i == 0 {
		return "/run/lock/valkey-operator-localcluster.lock"
	}
	return fmt.Sprintf("/run/lock/valkey-operator-localcluster-%d.lock", i)
}

// Options configure Start. The zero value starts the default three-zone cluster.
type Options struct {
	// Dir holds etcd data, certificates, the kubeconfig, pod volumes and logs. Default: a new
	// temporary directory, removed by Stop.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler. Default:
	// $KUBEBUILDER_ASSETS, else ~/.cache/valkey-operator/k8s-<K8sVersion>.
	BinDir string
	// Nodes to register. Default: DefaultNodes().
	Nodes []kubelet.NodeSpec
	// Images maps an image repository (no tag) to the host binary the kubelet runs for a
	// container of that image that has no command (e.g. the operator's own image).
	Images map[string]string
	// ImageCommands maps an image reference prefix to a host folder whose bin/ holds the
	// commands a container of that image runs (kubelet.Config.ImageCommands). Default (nil):
	// DefaultImageCommands(). An empty map runs the host's valkey-server for every tag.
	ImageCommands map[string]string
	// Log receives the control-plane processes' output. Default: files under Dir/logs.
	Log io.Writer
	// OnBusy, if set, is called once when every slot is taken and Start starts to wait.
	OnBusy func()
	// CoreDNS is the CoreDNS binary run as the cluster DNS (dns.go). Default: DefaultCoreDNS().
	CoreDNS string
	// NetworkPolicies runs a NetworkPolicy enforcer on every Node (netpol.go), so policies are
	// enforced as a network plugin would; off, they are stored and nothing enforces them.
	// Default: off, unless $LOCALCLUSTER_NETWORK_POLICIES is 1.
	NetworkPolicies bool
	// Netpol is the enforcer's binary. Default: DefaultNetpol().
	Netpol string
	// ResourcesOff leaves the pods' CPU and memory unenforced: no cgroups, nothing OOM-killed
	// (kubelet.Config.EnforceResources). Default: enforced, unless $LOCALCLUSTER_RESOURCES is 0.
	ResourcesOff bool
}

// DefaultNodes returns three Nodes, one in each of zone-a, zone-b and zone-c.
func DefaultNodes() []kubelet.NodeSpec {
	return []kubelet.NodeSpec{
		{Name: "node-a", Zone: "zone-a"},
		{Name: "node-b", Zone: "zone-b"},
		{Name: "node-c", Zone: "zone-c"},
	}
}

// Valkey9Version is the Valkey that a valkey/valkey:9.* image runs here: Debian sid's build,
// unpacked by hack/install-valkey9.sh (`make packages`). valkey/valkey:8.* and every other image
// run the host's valkey-server, 8.0.1 from bookworm-backports.
const Valkey9Version = "9.1.2"

// Valkey9Dir is where hack/install-valkey9.sh puts Valkey 9 (its bin/ holds valkey-server and
// valkey-cli): $VALKEY9_DIR, else ~/.cache/valkey-operator/valkey-<Valkey9Version>.
func Valkey9Dir() string {
	if d := os.Getenv("VALKEY9_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "valkey-operator", "valkey-"+Valkey9Version)
}

// DefaultImageCommands makes an image's tag choose the Valkey that runs, as pulling it would:
// valkey/valkey:9.* runs Valkey9Version from Valkey9Dir; everything else the host's commands.
// A 9.x pod on a machine without Valkey9Dir stays Pending with a message naming the folder
// rather than quietly running 8.0.1.
func DefaultImageCommands() map[string]string {
	return map[string]string{"valkey/valkey:9.": Valkey9Dir()}
}

// Cluster is a running local cluster. Stop it with Stop.
type Cluster struct {
	// Dir is the state directory (see Options.Dir).
	Dir string
	// Kubeconfig is the path of an admin kubeconfig usable by kubectl and helm.
	Kubeconfig string
	// Config is the admin REST config (group system:masters).
	Config *rest.Config
	// Kubelet runs the pods and offers fault injection.
	Kubelet *kubelet.Kubelet
	// Network is the pod network (bridge, CIDR, gateway) of this cluster's slot.
	Network kubelet.NetworkConfig
	// NetworkPolicies is true when an enforcer runs on every Node (Options.NetworkPolicies).
	NetworkPolicies bool
	// AuditLog is the API server's audit log (JSON lines, one event per request at Metadata
	// level) of the requests made by AuditedUser: what the operator, run as its Deployment's
	// pod, really asks of the API server (tests/install compares it with what RBAC grants).
	AuditLog string

	env       *envtest.Environment
	procs     []*exec.Cmd
	cancel    context.CancelFunc
	lock      *os.File
	removeDir bool
	network   kubelet.NetworkConfig
	dnsAddr   string
	dnsPid    int
	// resolvConf names the cluster DNS for host commands (CommandWithDNS).
	resolvConf string
	stopped    bool
	netpolBin  string
}

// AuditedUser is the user whose requests the API server records in Cluster.AuditLog: the
// operator's ServiceAccount, as manifests/operator.yaml and the chart install it.
const AuditedUser = "system:serviceaccount:valkey-operator:valkey-operator"

// auditPolicy records AuditedUser's requests, without their bodies (Metadata), and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + AuditedUser + `"]
- level: None
`

// DefaultBinDir is where hack/build-control-plane.sh puts the control-plane binaries.
func DefaultBinDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "valkey-operator", "k8s-"+K8sVersion)
}

// Start brings up the control plane, the cluster DNS and the kubelet and returns once every
// Node is Ready and the DNS answers.
// It needs root (network namespaces, mounts). Errors name the missing prerequisite, e.g. the
// control-plane binaries (`make control-plane`) or valkey-server (`make packages`).
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("localcluster: must run as root (it creates network namespaces and mounts)")
	}
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("localcluster: %s not found in %s: run `make control-plane`", b, opts.BinDir)
		}
	}
	if opts.CoreDNS == "" {
		opts.CoreDNS = DefaultCoreDNS()
	}
	if _, err := os.Stat(opts.CoreDNS); err != nil {
		return nil, fmt.Errorf("localcluster: coredns not found at %s: run `make coredns`", opts.CoreDNS)
	}
	if _, err := exec.LookPath("valkey-server"); err != nil {
		return nil, errors.New("localcluster: valkey-server not on PATH: run `make packages`")
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes()
	}
	if os.Getenv("LOCALCLUSTER_NETWORK_POLICIES") == "1" {
		opts.NetworkPolicies = true
	}
	if os.Getenv("LOCALCLUSTER_RESOURCES") == "0" {
		opts.ResourcesOff = true
	}
	if opts.Netpol == "" {
		opts.Netpol = DefaultNetpol()
	}
	if opts.ImageCommands == nil {
		opts.ImageCommands = DefaultImageCommands()
	}
	c := &Cluster{Dir: opts.Dir}
	slot, lock, err := acquireSlot(ctx, opts.OnBusy)
	if err != nil {
		return nil, err
	}
	c.lock, c.network = lock, slotNetwork(slot)
	c.Network = c.network
	defer func() {
		if retErr != nil {
			_ = c.Stop()
		}
	}()
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "valkey-localcluster-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.removeDir = d, true
	}
	if err := reapSlot(slot, c.Dir); err != nil {
		return nil, err
	}
	for _, sub := range []string{"etcd", "pki", "logs", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	logOut := func(name string) (io.Writer, error) {
		if opts.Log != nil {
			return opts.Log, nil
		}
		return os.Create(filepath.Join(c.Dir, "logs", name+".log"))
	}

	// A previous run that was killed may have left its pods' namespaces behind, and its
	// enforcer's rules.
	c.netpolBin = opts.Netpol
	c.cleanNetpol(c.netpolBin)
	_ = kubelet.TeardownNetwork(c.network)
	if err := kubelet.SetupNetwork(c.network); err != nil {
		return nil, fmt.Errorf("localcluster: pod network: %w", err)
	}

	// etcd and kube-apiserver through envtest: it provisions the serving and client
	// certificates and the service-account signing key, which we would otherwise write by hand.
	etcdOut, err := logOut("etcd")
	if err != nil {
		return nil, err
	}
	apiOut, err := logOut("kube-apiserver")
	if err != nil {
		return nil, err
	}
	api := &envtest.APIServer{CertDir: filepath.Join(c.Dir, "pki"), Out: apiOut, Err: apiOut, StartTimeout: 2 * time.Minute}
	// Listening on the gateway lets pods (the operator's own, in cluster) reach the API server;
	// envtest adds that address to the serving certificate.
	api.SecureServing.ListenAddr.Address = c.network.Gateway
	port, err := freePort(c.network.Gateway)
	if err != nil {
		return nil, err
	}
	api.SecureServing.ListenAddr.Port = strconv.Itoa(port)
	args := api.Configure()
	// envtest disables the ServiceAccount admission plugin; a real cluster has it, and pods
	// need their token volume.
	args.Disable("disable-admission-plugins")
	args.Set("advertise-address", c.network.Gateway)
	args.Set("service-cluster-ip-range", "10.96.0.0/16")
	args.Set("allow-privileged", "true")
	args.Set("kubelet-preferred-address-types", "InternalIP")
	kubeletCA, kubeletFlags, err := kubeletAuth(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	for flag, v := range kubeletFlags {
		args.Set(flag, v)
	}
	args.Set("endpoint-reconciler-type", "none")
	c.AuditLog = filepath.Join(c.Dir, "logs", "audit.log")
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", c.AuditLog)
	args.Set("audit-log-format", "json")
	// Never rotated (100 GB): the benchmarks count requests in it from an offset, and the
	// default, 100 MB, rotated it in the middle of a simulated fleet's steady window (1 000
	// clusters write that in a few minutes), which then counted none.
	args.Set("audit-log-maxsize", "102400")
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: opts.BinDir,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(c.Dir, "etcd"), Out: etcdOut, Err: etcdOut, StartTimeout: time.Minute},
			APIServer: api,
		},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := c.env.Start()
	if err != nil {
		return nil, fmt.Errorf("localcluster: control plane: %w", err)
	}
	c.Config = cfg

	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := c.writeKubeconfig(c.Kubeconfig, "admin", "system:masters"); err != nil {
		return nil, err
	}
	caFile := filepath.Join(c.Dir, "pki", "serving-ca.crt")
	if err := os.WriteFile(caFile, api.SecureServing.CA, 0o644); err != nil {
		return nil, err
	}

	pctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	kcmCfg := filepath.Join(c.Dir, "kcm.kubeconfig")
	if err := c.writeKubeconfig(kcmCfg, "system:kube-controller-manager", "system:masters"); err != nil {
		return nil, err
	}
	schedCfg := filepath.Join(c.Dir, "scheduler.kubeconfig")
	if err := c.writeKubeconfig(schedCfg, "system:kube-scheduler", "system:masters"); err != nil {
		return nil, err
	}
	kcmOut, err := logOut("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	if err := c.run(pctx, kcmOut, filepath.Join(opts.BinDir, "kube-controller-manager"),
		"--kubeconfig="+kcmCfg,
		"--authentication-kubeconfig="+kcmCfg,
		"--authorization-kubeconfig="+kcmCfg,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--service-account-private-key-file="+filepath.Join(c.Dir, "pki", "sa-signer.key"),
		"--root-ca-file="+caFile,
		"--use-service-account-credentials=false",
		"--controllers=*,-nodeipam",
		"--node-monitor-grace-period=20s",
		"--concurrent-gc-syncs=5",
	); err != nil {
		return nil, err
	}
	schedOut, err := logOut("kube-scheduler")
	if err != nil {
		return nil, err
	}
	if err := c.run(pctx, schedOut, filepath.Join(opts.BinDir, "kube-scheduler"),
		"--kubeconfig="+schedCfg,
		"--authentication-kubeconfig="+schedCfg,
		"--authorization-kubeconfig="+schedCfg,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
	); err != nil {
		return nil, err
	}

	dnsOut, err := logOut("coredns")
	if err != nil {
		return nil, err
	}
	if err := c.startDNS(ctx, pctx, opts.CoreDNS, dnsOut); err != nil {
		return nil, err
	}

	if opts.NetworkPolicies {
		netpolOut, err := logOut("netpol")
		if err != nil {
			return nil, err
		}
		if err := c.startNetpol(ctx, pctx, opts.Netpol, slot, opts.Nodes, netpolOut); err != nil {
			return nil, err
		}
	}

	k, err := kubelet.Start(pctx, kubelet.Config{
		RESTConfig:    cfg,
		Network:       c.network,
		Nodes:         opts.Nodes,
		StateDir:      filepath.Join(c.Dir, "kubelet"),
		APIServerHost: c.network.Gateway,
		APIServerPort: port,
		Images:        opts.Images,
		ImageCommands: opts.ImageCommands,
		// Node i serves the kubelet API on the gateway at 10250+i, so `kubectl logs`, `exec`,
		// `attach` and `run -it` work through the API server.
		KubeletPortBase: 10250,
		APIAuthority:    kubeletCA,
		ClusterDNS:      c.network.Gateway,
		ClusterDomain:   ClusterDomain,
		// Each container in a cgroup with its limits, as on a real node (kubelet/cgroups.go).
		EnforceResources: !opts.ResourcesOff,
	})
	if err != nil {
		return nil, fmt.Errorf("localcluster: kubelet: %w", err)
	}
	c.Kubelet = k
	if err := c.waitReady(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	if err := c.waitDNS(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// run starts one control-plane process that lives until Stop.
func (c *Cluster) run(ctx context.Context, out io.Writer, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localcluster: start %s: %w", filepath.Base(path), err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// writeKubeconfig provisions a client-certificate user and writes its kubeconfig to path.
func (c *Cluster) writeKubeconfig(path, user string, groups ...string) error {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return fmt.Errorf("localcluster: user %s: %w", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// UserKubeconfig writes a kubeconfig of a client certificate for user in groups into the
// cluster's directory and returns its path: a benchmark runs the operator as AuditedUser (with
// system:masters, so that it needs no RBAC) to count its requests in AuditLog.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	path := filepath.Join(c.Dir, strings.NewReplacer(":", "_", "/", "_").Replace(user)+".kubeconfig")
	return path, c.writeKubeconfig(path, user, groups...)
}

// waitReady waits until every Node is registered and Ready, the default ServiceAccount
// exists (kube-controller-manager is up) and the scheduler has a lease-free start.
func (c *Cluster) waitReady(ctx context.Context, nodes []kubelet.NodeSpec) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		ready := 0
		for _, n := range nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metaGet)
			if err == nil && nodeReady(node) {
				ready++
			}
		}
		_, saErr := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metaGet)
		if ready == len(nodes) && saErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: %d/%d nodes Ready, default service account: %s (see %s/logs): %w",
				ready, len(nodes), fmt.Sprint(saErr), c.Dir, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// APIServerURL is the API server's address, reachable from the host and from pods.
func (c *Cluster) APIServerURL() *url.URL {
	return c.env.ControlPlane.APIServer.SecureServing.URL("https", "/")
}

// KeepDir leaves the cluster's directory (the components' logs, the pods' logs under the
// kubelet's state) in place when it stops, for a failed run to be read afterwards.
func (c *Cluster) KeepDir() { c.removeDir = false }

// Stop kills every pod process, the controllers, the API server and etcd, removes the pod
// network, and (when Start made it and KeepDir was not called) the state directory. Safe to
// call more than once.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	if c.Kubelet != nil {
		c.Kubelet.Stop()
	}
	if c.cancel != nil {
		c.cancel()
	}
	for _, p := range c.procs {
		_ = p.Wait()
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := kubelet.TeardownNetwork(c.network); err != nil {
		errs = append(errs, err)
	}
	c.cleanNetpol(c.netpolBin) // each enforcer deletes its table as it stops; one killed does not
	if c.removeDir && c.Dir != "" {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if c.lock != nil {
		_ = c.lock.Close()
	}
	return errors.Join(errs...)
}

// reapSlot kills what a previous holder of slot i left running (a test binary killed by its
// timeout takes neither etcd nor kube-apiserver with it: envtest starts them without a parent
// death signal), found by the state directory on their command lines, then records dir as the
// slot's current one. It runs while the slot's lock is held.
func reapSlot(i int, dir string) error {
	record := strings.TrimSuffix(lockFile(i), ".lock") + ".dir"
	if old, err := os.ReadFile(record); err == nil && len(old) > 0 {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(cmdline, old) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return os.WriteFile(record, []byte(dir+string(filepath.Separator)), 0o644)
}

// acquireSlot takes the highest free slot's lock, waiting while every slot is taken.
func acquireSlot(ctx context.Context, onBusy func()) (int, *os.File, error) {
	files := make([]*os.File, Slots)
	for i := range Slots {
		if err := os.MkdirAll(filepath.Dir(lockFile(i)), 0o755); err != nil {
			return 0, nil, err
		}
		f, err := os.OpenFile(lockFile(i), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		files[i] = f
	}
	closeAll := func(except int) {
		for i, f := range files {
			if i != except {
				_ = f.Close()
			}
		}
	}
	for {
		// The highest free slot first: slot 0 is also the kubelet package's tests' only one, and a
		// long end-to-end run holding it would make them wait it out.
		for i := Slots - 1; i >= 0; i-- {
			f := files[i]
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				closeAll(i)
				return i, f, nil
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				closeAll(-1)
				return 0, nil, fmt.Errorf("localcluster: lock %s: %w", lockFile(i), err)
			}
		}
		if onBusy != nil {
			onBusy()
			onBusy = nil
		}
		select {
		case <-ctx.Done():
			closeAll(-1)
			return 0, nil, fmt.Errorf("localcluster: waiting for a free local-cluster slot: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

var metaGet = metav1.GetOptions{}

// freePort asks the kernel for a port that is free on host. envtest would pick one on
// 127.0.0.1 only, and the API server must listen on the gateway.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("localcluster: free port on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
