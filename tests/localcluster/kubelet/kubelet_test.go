package kubelet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// The tests share one real kube-apiserver (envtest, no scheduler: pods are
// bound by setting spec.nodeName) and one Kubelet with three nodes.
var (
	client     kubernetes.Interface
	restConfig *rest.Config
	kl         *kubelet.Kubelet
	network    = kubelet.NetworkConfig{Bridge: "vkokt0", CIDR: "10.244.250.0/24", Gateway: "10.244.250.1"}
	nodes      = []kubelet.NodeSpec{{Name: "kt-a", Zone: "zone-a"}, {Name: "kt-b", Zone: "zone-b"}, {Name: "kt-c", Zone: "zone-c"},
		// For the resize tests (resources_test.go): little room, and the static memory manager.
		{Name: resizeNode, Zone: "zone-d", Allocatable: resourceList("cpu=2,memory=1Gi"), MemoryManagerPolicy: "Static"}}
	setupErr error
	// seenPids are pod processes the tests looked at; none may outlive Stop.
	seenPids []int
)

const binDirDefault = "/root/.cache/valkey-operator/k8s-v1.37.2"

func TestMain(m *testing.M) {
	code := run(m)
	os.Exit(code)
}

func run(m *testing.M) int {
	cleanup, err := setup()
	if err != nil {
		// Every test fails with this message rather than skipping.
		setupErr = err
	}
	code := m.Run()
	cleanup()
	if setupErr == nil {
		// Stop and TeardownNetwork leave nothing behind.
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), network.Bridge) {
				fmt.Println("leftover network namespace", e.Name())
				code = 1
			}
		}
		for _, p := range seenPids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil {
				fmt.Println("leftover pod process", p)
				code = 1
			}
		}
	}
	return code
}

func setup() (func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if os.Geteuid() != 0 {
		return cleanup, fmt.Errorf("these tests need root (network namespaces, bridges, mounts)")
	}
	// One local cluster per machine at a time, as tests/localcluster does:
	// both use the 10.244.0.0/16 range, and a second run of this package
	// would tear down the first one's bridge.
	// Local clusters take slot 0 last (see localcluster.acquireSlot), but three of them (a
	// demo, the e2e and install tests) may hold every slot for the length of a run.
	lock, err := acquireLock(45 * time.Minute)
	if err != nil {
		return cleanup, err
	}
	cleanups = append(cleanups, func() { _ = lock.Close() })
	binDir := os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		binDir = binDirDefault
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return cleanup, fmt.Errorf("%s missing in %s: run hack/build-control-plane.sh first", b, binDir)
		}
	}
	for _, b := range []string{"valkey-server", "valkey-cli", "ip", "nsenter", "unshare", "setpriv"} {
		if _, err := exec.LookPath(b); err != nil {
			return cleanup, fmt.Errorf("%s is not on PATH: install valkey-server/valkey-tools from bookworm-backports and util-linux/iproute2", b)
		}
	}
	// Several control planes start at once under make test: the default 20 s start timeout is
	// too short on 2 cores.
	env := &envtest.Environment{BinaryAssetsDirectory: binDir, ControlPlaneStartTimeout: 2 * time.Minute}
	// `kubectl logs` reaches the kubelet at the node's InternalIP.
	env.ControlPlane.GetAPIServer().Configure().Set("kubelet-preferred-address-types", "InternalIP")
	cfg, err := env.Start()
	if err != nil {
		return cleanup, fmt.Errorf("start envtest: %w", err)
	}
	cleanups = append(cleanups, func() { _ = env.Stop() })
	client, restConfig = kubernetes.NewForConfigOrDie(cfg), cfg

	_ = kubelet.TeardownNetwork(network) // leftovers of a crashed run
	if err := kubelet.SetupNetwork(network); err != nil {
		return cleanup, err
	}
	cleanups = append(cleanups, func() { _ = kubelet.TeardownNetwork(network) })
	stateDir, err := os.MkdirTemp("", "kubelet-test-")
	if err != nil {
		return cleanup, err
	}
	cleanups = append(cleanups, func() {
		if os.Getenv("KEEP_STATE") == "" {
			_ = os.RemoveAll(stateDir)
		} else {
			fmt.Println("state kept in", stateDir)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cleanups = append(cleanups, cancel)
	kl, err = kubelet.Start(ctx, kubelet.Config{
		RESTConfig: cfg, Network: network, Nodes: nodes, StateDir: stateDir,
		APIServerHost: network.Gateway, APIServerPort: 6443,
		Images:           map[string]string{"valkey/valkey": "valkey-server"},
		ImageCommands:    map[string]string{missingImagePrefix: missingCommandsDir},
		KubeletPortBase:  31250,
		EnforceResources: true,
	})
	if err != nil {
		return cleanup, fmt.Errorf("start kubelet: %w", err)
	}
	cleanups = append(cleanups, kl.Stop)
	return cleanup, nil
}

// lockFile is shared with tests/localcluster.
const lockFile = "/run/lock/valkey-operator-localcluster.lock"

func acquireLock(timeout time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s (held by another local cluster or test run): %w", lockFile, err)
		}
		time.Sleep(time.Second)
	}
}

func requireSetup(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("test environment: %v", setupErr)
	}
}

// eventually polls cond until it holds, failing the test with the last
// explanation after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kt-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Pods go with graceful deletion; the namespace object stays (there
		// is no namespace controller in envtest).
		pods, _ := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			_ = client.CoreV1().Pods(ns.Name).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))})
		}
	})
	return ns.Name
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func waitPod(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, timeout, what, func() (bool, string) {
		var err error
		p, err = client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cond(p), fmt.Sprintf("phase=%s conditions=%v containers=%+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
	return p
}

// pid is the container's host process id, from the containerID the kubelet
// reports ("local://<pid>").
func pid(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatal("no container status")
	}
	n, err := strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "local://"))
	if err != nil {
		t.Fatalf("container id %q: %v", p.Status.ContainerStatuses[0].ContainerID, err)
	}
	seenPids = append(seenPids, n)
	return n
}

// inPod runs a command in the container's mount, network and UTS namespaces.
func inPod(t *testing.T, p *corev1.Pod, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid(t, p)), "-m", "-n", "-u", "--"}, args...)...).CombinedOutput()
	return string(out), err
}

// valkeyDo sends one command over a raw RESP connection to ip:6379 and
// returns the first reply line.
func valkeyDo(ip string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), timeout)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

const valkeyConf = `port 6379
bind 0.0.0.0
protected-mode no
dir /data
save ""
appendonly no
include /etc/valkey-auth/auth.conf
`

type podOpt func(*corev1.Pod)

// newValkeyPod is a pod like the operator's: valkey-server with its config
// from a ConfigMap, its password from a Secret, data on an emptyDir, a
// readiness probe that runs valkey-cli inside the pod, as a non-root user.
func newValkeyPod(name, node string, opts ...podOpt) *corev1.Pod {
	uid := int64(1000)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "valkey"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			ServiceAccountName:            "default",
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64(10)),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid},
			Containers: []corev1.Container{{
				Name:    "valkey-server",
				Image:   "valkey/valkey:8.0.1",
				Command: []string{"valkey-server", "/etc/valkey/valkey.conf"},
				Env: []corev1.EnvVar{
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "auth"}, Key: "password"}}},
					{Name: "GREETING", Value: "hello $(POD_NAME)"},
				},
				Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 6379}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
						"sh", "-c", `valkey-cli -a "$PASSWORD" --no-auth-warning -h 127.0.0.1 get ready | grep -q yes`,
					}}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/valkey"},
					{Name: "auth", MountPath: "/etc/valkey-auth"},
					{Name: "data", MountPath: "/data"},
					{Name: "info", MountPath: "/etc/podinfo"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "valkey-conf"}}}},
				{Name: "auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "auth", DefaultMode: new(int32(0o440))}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3600))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "valkey-conf"},
						Items: []corev1.KeyToPath{{Key: "valkey.conf", Path: "conf/valkey.conf"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
						{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
					}}},
				}}}},
			},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// createValkeyObjects creates the ConfigMap and Secret the valkey pods use.
func createValkeyObjects(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "valkey-conf"},
		Data:       map[string]string{"valkey.conf": valkeyConf},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "auth"},
		StringData: map[string]string{"auth.conf": "requirepass s3cret\n", "password": "s3cret", "extra": "v1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, ns string, p *corev1.Pod) {
	t.Helper()
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startValkey creates a valkey pod and waits until it runs and answers.
func startValkey(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	createPod(t, ns, newValkeyPod(name, node))
	p := waitPod(t, ns, name, 30*time.Second, "pod running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	eventually(t, 10*time.Second, "valkey answers on the pod IP", func() (bool, string) {
		out, err := valkeyDo(p.Status.PodIP, time.Second, "AUTH", "s3cret")
		return err == nil && out == "+OK", fmt.Sprint(out, err)
	})
	return p
}

func TestNodesRegistered(t *testing.T) {
	requireSetup(t)
	ctx := context.Background()
	for _, want := range nodes {
		n, err := client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{
			"kubernetes.io/hostname": want.Name, "topology.kubernetes.io/zone": want.Zone, "kubernetes.io/os": "linux",
		} {
			if n.Labels[k] != v {
				t.Errorf("node %s label %s = %q, want %q", want.Name, k, n.Labels[k], v)
			}
		}
		pods := n.Status.Allocatable[corev1.ResourcePods]
		if pods.Value() < 50 {
			t.Errorf("node %s allocatable pods %s", want.Name, pods.String())
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			t.Errorf("node %s not Ready: %v", want.Name, n.Status.Conditions)
		}
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s lease: %v", want.Name, err)
		}
		if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > time.Minute {
			t.Errorf("node %s lease not renewed: %v", want.Name, lease.Spec.RenewTime)
		}
	}
}

// TestValkeyPod proves a pod runs a real valkey-server on its own IP with its
// volumes and environment, Ready follows the readiness probe, and a Secret
// update reaches the mounted files.
func TestValkeyPod(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	start := time.Now()
	createPod(t, ns, newValkeyPod("valkey-0", "kt-a"))
	p := waitPod(t, ns, "valkey-0", 30*time.Second, "pod running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	eventually(t, 10*time.Second, "PING on the pod IP", func() (bool, string) {
		out, err := valkeyDo(p.Status.PodIP, time.Second, "PING")
		// requirepass from the Secret volume: unauthenticated PING is refused.
		return err == nil && strings.HasPrefix(out, "-NOAUTH"), fmt.Sprint(out, err)
	})
	t.Logf("pod start: created → valkey answering on %s in %s", p.Status.PodIP, time.Since(start).Round(time.Millisecond))
	if out, err := valkeyDo(p.Status.PodIP, time.Second, "HELLO", "3", "AUTH", "default", "s3cret"); err != nil || !strings.HasPrefix(out, "%") {
		t.Fatalf("AUTH with the Secret's password: %q %v", out, err)
	}

	// Status as a kubelet reports it.
	if p.Status.HostIP != network.Gateway || p.Status.StartTime == nil || len(p.Status.PodIPs) != 1 {
		t.Errorf("status: hostIP=%q startTime=%v podIPs=%v", p.Status.HostIP, p.Status.StartTime, p.Status.PodIPs)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil || cs.Name != "valkey-server" || cs.RestartCount != 0 {
		t.Errorf("container status %+v", cs)
	}
	if condition(p, corev1.PodScheduled) != corev1.ConditionTrue || condition(p, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("conditions %v", p.Status.Conditions)
	}

	// Ready comes from the readiness probe: false until the key exists.
	if condition(getPod(t, ns, "valkey-0"), corev1.PodReady) != corev1.ConditionFalse {
		t.Fatalf("pod Ready before its probe can pass: %v", p.Status.Conditions)
	}
	if err := exec.Command("valkey-cli", "-h", p.Status.PodIP, "-a", "s3cret", "--no-auth-warning", "set", "ready", "yes").Run(); err != nil {
		t.Fatal(err)
	}
	probeStart := time.Now()
	waitPod(t, ns, "valkey-0", 10*time.Second, "Ready after the probe passes", func(p *corev1.Pod) bool {
		return condition(p, corev1.PodReady) == corev1.ConditionTrue && condition(p, corev1.ContainersReady) == corev1.ConditionTrue &&
			p.Status.ContainerStatuses[0].Ready
	})
	t.Logf("readiness: probe passing → Ready in %s", time.Since(probeStart).Round(time.Millisecond))
	if err := exec.Command("valkey-cli", "-h", p.Status.PodIP, "-a", "s3cret", "--no-auth-warning", "del", "ready").Run(); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "valkey-0", 10*time.Second, "not Ready after the probe fails", func(p *corev1.Pod) bool {
		return condition(p, corev1.PodReady) == corev1.ConditionFalse
	})

	// The process: user, hostname, environment, mounts.
	procStatus, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid(t, p)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(procStatus), "Uid:\t1000\t1000") || !strings.Contains(string(procStatus), "Groups:\t1000") {
		t.Errorf("runAsUser/fsGroup not applied:\n%s", procStatus)
	}
	if out, err := inPod(t, p, "hostname"); err != nil || strings.TrimSpace(out) != "valkey-0" {
		t.Errorf("hostname in pod: %q %v", out, err)
	}
	for path, want := range map[string]string{
		"/etc/valkey/valkey.conf":       valkeyConf,
		"/etc/valkey-auth/password":     "s3cret",
		"/etc/podinfo/name":             "valkey-0",
		"/etc/podinfo/conf/valkey.conf": valkeyConf,
	} {
		if out, err := inPod(t, p, "cat", path); err != nil || out != want {
			t.Errorf("%s in pod = %q (%v), want %q", path, out, err, want)
		}
	}
	if out, err := inPod(t, p, "cat", "/etc/podinfo/labels"); err != nil || !strings.Contains(out, "app=\"valkey\"\n") {
		t.Errorf("labels in pod: %q %v", out, err)
	}
	if out, err := inPod(t, p, "cat", "/etc/podinfo/token"); err != nil || strings.Count(out, ".") != 2 {
		t.Errorf("service account token in pod: %q %v", out, err)
	}
	if out, err := inPod(t, p, "sh", "-c", "touch /etc/valkey/x"); err == nil {
		t.Errorf("configMap volume is writable: %s", out)
	}

	// A Secret update reaches the mounted file.
	sec, err := client.CoreV1().Secrets(ns).Get(context.Background(), "auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["extra"] = []byte("v2")
	if _, err := client.CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	eventually(t, 30*time.Second, "secret update in the pod", func() (bool, string) {
		out, err := inPod(t, p, "cat", "/etc/valkey-auth/extra")
		return err == nil && out == "v2", fmt.Sprint(out, err)
	})
	t.Logf("secret update reached the pod in %s", time.Since(updated).Round(time.Millisecond))
}

// TestEnvAndLogs: the environment a kubelet gives (valueFrom, $(VAR),
// service variables) reaches the process, whose output lands in its log file.
// (valkey-server overwrites its own /proc/<pid>/environ, hence a shell.)
func TestEnvAndLogs(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	p := newValkeyPod("env", "kt-b")
	p.Spec.Containers[0].Command = []string{"sh", "-c", "env; id -u; id -G; pwd; echo done; exec sleep 1000"}
	p.Spec.Containers[0].WorkingDir = "/data"
	p.Spec.Containers[0].ReadinessProbe = nil
	createPod(t, ns, p)
	waitPod(t, ns, "env", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	path, err := kl.LogPath(ns, "env", "valkey-server")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	eventually(t, 10*time.Second, "output in the log file", func() (bool, string) {
		b, _ := os.ReadFile(path)
		out = string(b)
		return strings.Contains(out, "done\n"), out
	})
	got, _ := client.CoreV1().Pods(ns).Get(context.Background(), "env", metav1.GetOptions{})
	for _, want := range []string{"POD_IP=" + got.Status.PodIP, "PASSWORD=s3cret", "GREETING=hello env",
		"KUBERNETES_SERVICE_HOST=" + network.Gateway, "KUBERNETES_SERVICE_PORT=6443", "HOSTNAME=env", "\n1000\n1000\n/data\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestContainerLogs: logs reach a client through the API server, as with
// `kubectl logs`, with tailLines and follow.
func TestContainerLogs(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "talker"},
		Spec: corev1.PodSpec{NodeName: "kt-b", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Command: []string{"sh", "-c", "echo line1; echo line2; echo line3; sleep 2; echo late"}}}},
	})
	waitPod(t, ns, "talker", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	ctx := context.Background()
	var got string
	eventually(t, 10*time.Second, "tail of the log through the API server", func() (bool, string) {
		b, err := client.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{TailLines: new(int64(2))}).DoRaw(ctx)
		got = string(b)
		return err == nil && got == "line2\nline3\n", fmt.Sprint(got, err)
	})
	stream, err := client.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	b, err := io.ReadAll(stream) // ends when the container exits
	if err != nil || string(b) != "line1\nline2\nline3\nlate\n" {
		t.Errorf("followed log = %q, %v", b, err)
	}
}

// TestSecurityContext: runAsNonRoot without a user runs as 65532,
// allowPrivilegeEscalation false sets no_new_privs.
func TestSecurityContext(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nonroot"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)},
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false)},
				Command:         []string{"sh", "-c", "id -u; grep NoNewPrivs /proc/self/status"}}}},
	})
	waitPod(t, ns, "nonroot", 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	path, err := kl.LogPath(ns, "nonroot", "c")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "65532\n") || !strings.Contains(string(b), "NoNewPrivs:\t1") {
		t.Errorf("output %q", b)
	}
}

func TestKillPodFails(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	startValkey(t, ns, "valkey-kill", "kt-b")
	if err := kl.KillPod(ns, "valkey-kill"); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "valkey-kill", 15*time.Second, "pod Failed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.Reason != "Error" {
		t.Errorf("terminated state %+v", term)
	}
	if condition(p, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("failed pod still Ready")
	}
	if _, err := valkeyDo(p.Status.PodIP, time.Second, "PING"); err == nil {
		t.Errorf("killed valkey still answers")
	}
}

func TestExitCodes(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	for name, cmd := range map[string][]string{"ok": {"true"}, "bad": {"sh", "-c", "exit 3"}} {
		createPod(t, ns, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: "kt-c", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: cmd}}},
		})
	}
	p := waitPod(t, ns, "ok", 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("ok: %+v", p.Status.ContainerStatuses[0].State)
	}
	p = waitPod(t, ns, "bad", 20*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 {
		t.Errorf("bad: %+v", p.Status.ContainerStatuses[0].State)
	}
}

// TestChildProcessesDie: what a container started dies with it, whether the
// main process exits or is killed.
func TestChildProcessesDie(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	for name, script := range map[string]string{
		"exits":  "sleep 1234 & echo child=$!; sleep 1; exit 0",
		"killed": "sleep 1235 & echo child=$!; wait",
	} {
		createPod(t, ns, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: "kt-c", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", script}}}},
		})
	}
	child := func(name string) string {
		var pid string
		eventually(t, 10*time.Second, "child pid in the log", func() (bool, string) {
			path, err := kl.LogPath(ns, name, "c")
			if err != nil {
				return false, err.Error()
			}
			b, _ := os.ReadFile(path)
			_, after, ok := strings.Cut(string(b), "child=")
			pid = strings.TrimSpace(after)
			return ok && strings.HasSuffix(string(b), "\n"), string(b)
		})
		return pid
	}
	exitsChild := child("exits")
	killedChild := child("killed")
	if err := kl.KillPod(ns, "killed"); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "exits", 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	waitPod(t, ns, "killed", 20*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	for _, pid := range []string{exitsChild, killedChild} {
		eventually(t, 5*time.Second, "child "+pid+" gone", func() (bool, string) {
			b, err := os.ReadFile("/proc/" + pid + "/cmdline")
			return err != nil || !strings.HasPrefix(string(b), "sleep"), string(b)
		})
	}
}

// TestMissingConfigMapWaits: a pod whose ConfigMap does not exist yet stays
// Pending (not Failed) and starts once it appears, as on a real kubelet.
func TestMissingConfigMapWaits(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "waits"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"cat", "/cfg/x"}, VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}}},
			Volumes:    []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}}}}},
		},
	})
	waitPod(t, ns, "waits", 20*time.Second, "Pending with CreateContainerConfigError", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if _, err := client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"x": "y"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "waits", 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

// An image whose commands folder (Config.ImageCommands) is missing.
const (
	missingImagePrefix = "example.com/valkey:9."
	missingCommandsDir = "/nonexistent/valkey-operator-kubelet-test"
)

// TestMissingImageCommandsWaits: a pod whose image takes its commands from a folder that is
// not there (Valkey 9 not unpacked yet) stays Pending with a message naming the folder, rather
// than running the host's command of the same name, another version.
func TestMissingImageCommandsWaits(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nine"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: missingImagePrefix + "1.2", Command: []string{"valkey-server", "--port", "0"}}},
		},
	})
	p := waitPod(t, ns, "nine", 20*time.Second, "Pending with CreateContainerConfigError", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, missingCommandsDir) {
		t.Fatalf("waiting message %q does not name %s", msg, missingCommandsDir)
	}
}

func TestGracefulDeletion(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	p := startValkey(t, ns, "valkey-del", "kt-c")
	proc := pid(t, p)
	start := time.Now()
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "valkey-del", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "pod object gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(ns).Get(context.Background(), "valkey-del", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// valkey-server exits promptly on SIGTERM, well before the 10 s grace.
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("deletion took %s: SIGTERM was not sent or not acted on", d)
	}
	t.Logf("graceful deletion took %s", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", proc)); err == nil {
		t.Errorf("process %d still alive", proc)
	}
	// The kubelet forgets a pod once it sees the API object gone: well under a
	// second on an idle machine, but make test (2026-12-07, load 22-31 with the e2e lanes) once
	// took over 5 s. The bound only says "eventually".
	eventually(t, 30*time.Second, "kubelet forgets the pod and frees its IP", func() (bool, string) {
		_, err := kl.LogPath(ns, "valkey-del", "valkey-server")
		out, _ := exec.Command("ip", "-all", "netns", "exec", "ip", "-o", "-4", "addr", "show").CombinedOutput()
		return err != nil && !strings.Contains(string(out), " "+p.Status.PodIP+"/"), fmt.Sprintf("tracked: %v; netns: %s", err == nil, out)
	})
}

// TestPreStopBeforeSIGTERM: a deleted pod's preStop exec hook runs inside the container
// (it sees the container's volumes) before SIGTERM, which follows when the hook ends, within
// the grace period. The operator's Valkey 8 pods rely on it to hand a primary's slots over.
func TestPreStopBeforeSIGTERM(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hooked"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(10)),
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Command: []string{"sh", "-c", "trap 'echo TERM; exit 0' TERM; echo up; while :; do if [ -f /data/prestop ]; then echo prestop-seen; rm /data/prestop; fi; sleep 0.1; done"},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", "touch /data/prestop; sleep 2"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
	})
	waitPod(t, ns, "hooked", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	path, err := kl.LogPath(ns, "hooked", "c")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "container up", func() (bool, string) {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "up\n"), string(b)
	})
	start := time.Now()
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "hooked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "pod object gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(ns).Get(context.Background(), "hooked", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	took := time.Since(start)
	b, _ := os.ReadFile(path)
	if out := string(b); !strings.Contains(out, "up\nprestop-seen\nTERM\n") {
		t.Errorf("want the hook seen, then SIGTERM; log:\n%s", out)
	}
	// SIGTERM waits for the 2 s hook, and no longer: the trap exits at once.
	if took < 2*time.Second || took > 8*time.Second {
		t.Errorf("deletion took %s, want the 2 s hook and then a prompt exit", took)
	}
	t.Logf("deletion with a 2 s preStop hook took %s", took.Round(time.Millisecond))
}

// TestForceDeleteAndRecreate: a force-deleted pod's process is stopped, and a
// new pod with the same name runs.
func TestForceDeleteAndRecreate(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	old := startValkey(t, ns, "valkey-again", "kt-a")
	oldPid := pid(t, old)
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "valkey-again", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	p := startValkey(t, ns, "valkey-again", "kt-a")
	if p.UID == old.UID || pid(t, p) == oldPid {
		t.Fatalf("still the old pod")
	}
	eventually(t, 5*time.Second, "old process gone", func() (bool, string) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", oldPid))
		return err != nil, "alive"
	})
	// The new pod keeps its status: the old one reports nothing more.
	p = waitPod(t, ns, "valkey-again", 5*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("new pod status %+v", p.Status.ContainerStatuses[0].State)
	}
}

// TestGracePeriodThenKill: a process that ignores SIGTERM is killed after
// the grace period.
func TestGracePeriodThenKill(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stubborn"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(2)),
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 0.2; done"}}}},
	})
	waitPod(t, ns, "stubborn", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// Running means the process started, not that the shell has run its trap yet: on a loaded
	// machine a SIGTERM sent at once killed it (the pod went away in 0.2 s; after a 1 s sleep, at
	// load 39, in 0.58 s). The shell says when it has.
	eventually(t, 20*time.Second, "the trap set", func() (bool, string) {
		b, err := client.CoreV1().Pods(ns).GetLogs("stubborn", &corev1.PodLogOptions{}).DoRaw(context.Background())
		return err == nil && strings.Contains(string(b), "trapped"), fmt.Sprint(string(b), err)
	})
	start := time.Now()
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "stubborn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "pod object gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(ns).Get(context.Background(), "stubborn", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("pod went away after %s, before its 2 s grace period", d)
	}
}

func TestCutPodNetwork(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	p := startValkey(t, ns, "valkey-net", "kt-b")
	if err := kl.CutPodNetwork(ns, "valkey-net"); err != nil {
		t.Fatal(err)
	}
	if out, err := valkeyDo(p.Status.PodIP, 2*time.Second, "PING"); err == nil {
		t.Fatalf("pod reachable with its network cut: %q", out)
	}
	if err := kl.RestorePodNetwork(ns, "valkey-net"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "pod reachable again", func() (bool, string) {
		out, err := valkeyDo(p.Status.PodIP, time.Second, "PING")
		return err == nil && strings.HasPrefix(out, "-NOAUTH"), fmt.Sprint(out, err)
	})
}

// TestStopNode: the node loses power, its lease stops, its pod's process dies;
// when it comes back the pod is reported Failed. A label an admin set on the node
// (here its zone, changed) survives the node's return, as with a kubelet: it sets
// its labels only when it first registers the node.
func TestStopNode(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	p := startValkey(t, ns, "valkey-node", "kt-c")
	ctx := context.Background()
	relabel := func(zone string, pool string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q,"node-pool":%s}}}`, corev1.LabelTopologyZone, zone, pool)
		if _, err := client.CoreV1().Nodes().Patch(ctx, "kt-c", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("us-east-1c", `"valkey"`)
	t.Cleanup(func() { relabel(nodes[2].Zone, "null") })
	if err := kl.StopNode("kt-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := valkeyDo(p.Status.PodIP, time.Second, "PING"); err == nil {
		t.Errorf("pod answers on a stopped node")
	}
	lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kt-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The lease is renewed every 10 s while the node runs.
	time.Sleep(12 * time.Second) //nolint:forbidigo // proving an absence needs a period of time
	lease2, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kt-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !lease2.Spec.RenewTime.Equal(lease.Spec.RenewTime) {
		t.Errorf("lease renewed while the node is stopped")
	}
	if got := getPod(t, ns, "valkey-node"); got.Status.Phase != corev1.PodRunning {
		t.Errorf("a stopped node updated its pod: %s", got.Status.Phase)
	}
	if err := kl.StartNode("kt-c"); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "valkey-node", 20*time.Second, "Failed after the node came back", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})
	// StartNode returns after the node's first status update.
	n, err := client.CoreV1().Nodes().Get(ctx, "kt-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if z, pool := n.Labels[corev1.LabelTopologyZone], n.Labels["node-pool"]; z != "us-east-1c" || pool != "valkey" {
		t.Errorf("the node's return reset the labels an admin set: zone %q, node-pool %q", z, pool)
	}
	eventually(t, 20*time.Second, "lease renewed again", func() (bool, string) {
		l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "kt-c", metav1.GetOptions{})
		return err == nil && !l.Spec.RenewTime.Equal(lease.Spec.RenewTime), fmt.Sprint(err)
	})
}

var _ = intstr.FromInt32

// TestLivenessKillsHungContainer: an exec liveness probe (an authenticated PING run inside the
// pod, as the operator's pods carry) passes while valkey-server answers, and once the server
// hangs (FreezePod: SIGSTOP, sockets open, no reply) the kubelet kills the container after
// failureThreshold misses, so the pod goes Failed (restartPolicy Never).
func TestLivenessKillsHungContainer(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	p := newValkeyPod("valkey-hung", "kt-a")
	c := &p.Spec.Containers[0]
	c.ReadinessProbe = nil
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
			"sh", "-c", `test "$(REDISCLI_AUTH="$(cat /etc/valkey-auth/password)" valkey-cli --no-auth-warning -h 127.0.0.1 PING)" = PONG`,
		}}},
		// The initial delay lets the server start on a loaded machine before a failed probe counts.
		InitialDelaySeconds: 5, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 2,
	}
	createPod(t, ns, p)
	running := waitPod(t, ns, "valkey-hung", 30*time.Second, "pod running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	eventually(t, 10*time.Second, "valkey answers on the pod IP", func() (bool, string) {
		out, err := valkeyDo(running.Status.PodIP, time.Second, "AUTH", "s3cret")
		return err == nil && out == "+OK", fmt.Sprint(out, err)
	})
	pid(t, running) // checked for leftovers at the end
	// A healthy server passes: several periods later (past failureThreshold) it still runs.
	time.Sleep(8 * time.Second) // past the initial delay and failureThreshold periods
	if got := getPod(t, ns, "valkey-hung"); got.Status.Phase != corev1.PodRunning {
		t.Fatalf("a healthy server's pod is %s: %+v", got.Status.Phase, got.Status.ContainerStatuses)
	}
	if condition(getPod(t, ns, "valkey-hung"), corev1.PodReady) != corev1.ConditionTrue {
		t.Fatal("without a readiness probe a running container is ready")
	}

	if err := kl.FreezePod(ns, "valkey-hung"); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	if _, err := valkeyDo(running.Status.PodIP, time.Second, "PING"); err == nil {
		t.Fatal("a frozen server answered")
	}
	failed := waitPod(t, ns, "valkey-hung", 20*time.Second, "pod Failed by its liveness probe", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed
	})
	t.Logf("liveness: frozen → pod Failed in %s", time.Since(frozen).Round(time.Millisecond))
	term := failed.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.Message != "liveness probe failed" {
		t.Fatalf("terminated state %+v", term)
	}
}
