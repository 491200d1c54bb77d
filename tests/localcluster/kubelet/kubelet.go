package kubelet

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Config is what Start needs to run the nodes.
type Config struct {
	// RESTConfig reaches the API server with rights to register nodes, update
	// pod status, read ConfigMaps and Secrets and request service account tokens
	// (an admin config is fine).
	RESTConfig *rest.Config
	// Network must already be set up with SetupNetwork.
	Network NetworkConfig
	// Nodes to register, e.g. three nodes in three zones.
	Nodes []NodeSpec
	// StateDir holds per-pod volume directories and logs.
	StateDir string
	// APIServerHost and APIServerPort are given to every container as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (there is no
	// kube-proxy, so this is the gateway address the API server listens on).
	APIServerHost string
	APIServerPort int
	// Images maps an image repository (without tag or digest) to the host
	// binary used as the entrypoint when a container has no command.
	Images map[string]string
	// ImageCommands lets an image's tag choose the program that runs, as pulling that image
	// would: it maps an image reference prefix, such as "valkey/valkey:9.", to a host folder
	// whose bin/ holds commands standing in for that image's own (valkey-server and valkey-cli
	// of Valkey 9, say, while the host's are 8). The longest matching prefix wins. A container
	// of such an image gets the folder bind-mounted read-only at ImageCommandsMountPath, with
	// its bin/ first on PATH: its command, exec probes and preStop hooks find those commands
	// before the host's. The mount, not the host path, is what the container runs, because
	// the folder may sit below a home directory that the container's non-root user cannot
	// enter. Commands the folder lacks come from the host as usual; a folder that is missing
	// leaves the pod Pending with a CreateContainerConfigError naming it.
	ImageCommands map[string]string
	// ClusterDNS is the nameserver address that pods of dnsPolicy ClusterFirst (the default)
	// get in their /etc/resolv.conf, as a kubelet's --cluster-dns (dns.go). Empty: as a
	// kubelet without it, those pods keep the host's resolv.conf.
	ClusterDNS string
	// ClusterDomain is the cluster's DNS domain (a kubelet's --cluster-domain) in the pods'
	// search list. Default: DefaultClusterDomain.
	ClusterDomain string
	// KubeletPortBase, when not zero, makes node i serve the kubelet API
	// (container logs) over HTTPS on Network.Gateway:KubeletPortBase+i, so that
	// `kubectl logs` works through the API server.
	KubeletPortBase int
	// APIAuthority, when set, secures the kubelet API both ways as a real cluster does: each
	// node's serving certificate is signed by it (the API server's
	// --kubelet-certificate-authority), and a client must present a certificate it signed (the
	// API server's --kubelet-client-certificate). Unset: a self-signed serving certificate and
	// no client authentication.
	APIAuthority *Authority
	// EnforceResources runs each container in a cgroup of its own, below one of its pod, with
	// the CPU and memory limits of its resources (cgroups.go): a process that passes its memory
	// limit is OOM-killed by the kernel and its container reported OOMKilled, and an in-place
	// resize changes the running cgroups (resize.go). Start fails, naming the missing controller,
	// when the machine lacks one. Off, nothing is enforced; resizes are still admitted and
	// reported as a kubelet does, and take effect at once.
	EnforceResources bool
}

// Authority is a certificate authority: its certificate and private key.
type Authority struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NodeSpec is one node to register.
type NodeSpec struct {
	Name string
	Zone string
	// Labels are added to the standard ones.
	Labels map[string]string
	// Allocatable sets the Node's allocatable (and capacity) cpu and memory; the others keep
	// their defaults (64 cpu, 256Gi). The scheduler places pods by it, and the kubelet admits
	// in-place resizes by it: one whose requests do not fit beside the other pods' is Deferred.
	Allocatable corev1.ResourceList
	// CPUManagerPolicy and MemoryManagerPolicy stand for the kubelet options of those names.
	// Only their effect on in-place resize is modelled: "static" (CPU) or "Static" (memory)
	// makes a resize of a Guaranteed pod's CPU (or memory) Infeasible, as a v1.37 kubelet with
	// that policy reports it. No CPU or NUMA pinning is done.
	CPUManagerPolicy, MemoryManagerPolicy string
}

// Kubelet runs the pods of all the configured nodes as local processes.
type Kubelet struct {
	cfg    Config
	client kubernetes.Interface
	ipam   *ipam

	cmFactory  informers.SharedInformerFactory
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	nodes map[string]*nodeState
	pods  map[string]*podRuntime // namespace/name

	// cg runs containers in cgroups (Config.EnforceResources); nil without enforcement.
	cg cgroupDriver
	// allocMu serializes resize admissions (resize.go), resizeKick wakes its retry loop.
	allocMu    sync.Mutex
	resizeKick chan struct{}

	stopOnce sync.Once
}

// nodeState is one node; its controllers run while the node is up.
type nodeState struct {
	spec     NodeSpec
	index    int
	cancel   context.CancelFunc
	done     chan struct{}
	notify   func(*corev1.Pod) // nil while the node is down
	stopping bool
	recorder record.EventRecorder // the node's Events (resizes); nil while the node is down
}

const (
	// leaseDurationSeconds is the node lease duration; the lease is renewed
	// every quarter of it.
	leaseDurationSeconds = 40
	// statusUpdateInterval is how often a node's status is written even when
	// nothing changed, as a kubelet's nodeStatusReportFrequency.
	statusUpdateInterval = 20 * time.Second
)

// Start registers the nodes and runs the pods bound to them until ctx ends or
// Stop is called.
func Start(ctx context.Context, cfg Config) (*Kubelet, error) {
	if cfg.RESTConfig == nil {
		return nil, errors.New("kubelet: RESTConfig is required")
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("kubelet: at least one node is required")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("kubelet: StateDir is required")
	}
	a, err := newIPAM(cfg.Network)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat("/sys/class/net/" + cfg.Network.Bridge); err != nil {
		return nil, fmt.Errorf("kubelet: bridge %s is missing, call SetupNetwork first: %w", cfg.Network.Bridge, err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("kubelet: state dir: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("kubelet: client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{
		cfg: cfg, client: client, ipam: a, ctx: ctx, cancel: cancel,
		nodes: map[string]*nodeState{}, pods: map[string]*podRuntime{},
		resizeKick: make(chan struct{}, 1),
	}
	if cfg.EnforceResources {
		var milliCPU int64
		for _, n := range cfg.Nodes {
			q := nodeAllocatable(n)[corev1.ResourceCPU]
			milliCPU += q.MilliValue()
		}
		if k.cg, err = newCgroupDriver("valkey-localcluster-"+cfg.Network.Bridge, milliCPUToShares(milliCPU)); err != nil {
			cancel()
			return nil, err
		}
	}
	go k.resizeLoop()
	// One cache of ConfigMaps and Secrets for every node: volumes read it on
	// each resync, and the pod controllers need the informers.
	k.cmFactory = informers.NewSharedInformerFactory(client, 10*time.Minute)
	k.configMaps = k.cmFactory.Core().V1().ConfigMaps().Lister()
	k.secrets = k.cmFactory.Core().V1().Secrets().Lister()
	_ = k.cmFactory.Core().V1().Services().Informer()
	k.cmFactory.Start(ctx.Done())
	for typ, ok := range k.cmFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("kubelet: %v cache did not sync", typ)
		}
	}
	for i, n := range cfg.Nodes {
		if n.Name == "" {
			cancel()
			return nil, errors.New("kubelet: node without a name")
		}
		k.nodes[n.Name] = &nodeState{spec: n, index: i}
	}
	for _, n := range cfg.Nodes {
		if err := k.StartNode(n.Name); err != nil {
			k.Stop()
			return nil, err
		}
	}
	go func() {
		<-ctx.Done()
		k.Stop()
	}()
	return k, nil
}

// Stop kills every pod process and removes the pods' network namespaces. The
// Node objects stay in the API server (they go NotReady).
func (k *Kubelet) Stop() {
	k.stopOnce.Do(func() {
		k.mu.Lock()
		nodes := make([]*nodeState, 0, len(k.nodes))
		for _, n := range k.nodes {
			nodes = append(nodes, n)
		}
		k.mu.Unlock()
		for _, n := range nodes {
			k.stopNodeControllers(n)
		}
		k.mu.Lock()
		pods := make([]*podRuntime, 0, len(k.pods))
		for _, p := range k.pods {
			pods = append(pods, p)
		}
		k.mu.Unlock()
		for _, p := range pods {
			p.destroy()
		}
		if k.cg != nil {
			if err := k.cg.remove(""); err != nil {
				klog.V(2).InfoS("remove cgroups", "err", err)
			}
		}
		k.cancel()
	})
}

// StartNode brings a node (back) up: it registers or updates the Node,
// renews its lease and runs its pod controller. Pods that died while the node
// was down are reported Failed.
func (k *Kubelet) StartNode(name string) error {
	k.mu.Lock()
	ns, ok := k.nodes[name]
	if !ok {
		k.mu.Unlock()
		return fmt.Errorf("kubelet: unknown node %q", name)
	}
	if ns.cancel != nil {
		k.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(k.ctx)
	ns.cancel, ns.done, ns.stopping = cancel, make(chan struct{}), false
	k.mu.Unlock()

	if err := k.runNode(ctx, ns); err != nil {
		k.stopNodeControllers(ns)
		return fmt.Errorf("kubelet: start node %s: %w", name, err)
	}
	// Tell the fresh pod controller where every pod of this node stands.
	for _, p := range k.podsOn(name) {
		p.changed()
	}
	return nil
}

// StopNode makes a node lose power: its pod processes die at once, its lease
// and status stop being renewed (so kube-controller-manager marks it
// NotReady) and its pods' status is no longer updated.
func (k *Kubelet) StopNode(name string) error {
	k.mu.Lock()
	ns, ok := k.nodes[name]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("kubelet: unknown node %q", name)
	}
	k.stopNodeControllers(ns)
	for _, p := range k.podsOn(name) {
		p.powerLoss()
	}
	return nil
}

func (k *Kubelet) stopNodeControllers(ns *nodeState) {
	k.mu.Lock()
	cancel, done := ns.cancel, ns.done
	ns.notify, ns.recorder = nil, nil
	ns.cancel = nil
	ns.stopping = true
	k.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// KillPod sends SIGKILL to every container process of the pod; with
// restartPolicy Never the pod goes Failed.
func (k *Kubelet) KillPod(namespace, name string) error {
	p, err := k.pod(namespace, name)
	if err != nil {
		return err
	}
	p.kill()
	return nil
}

// FreezePod stops (SIGSTOP) every container process of the pod: a hung
// server, its sockets open and nothing answering. Only a liveness probe
// turns that into a dead pod. ThawPod resumes them.
func (k *Kubelet) FreezePod(namespace, name string) error {
	return k.signalPod(namespace, name, syscall.SIGSTOP)
}

// ThawPod resumes (SIGCONT) the processes FreezePod stopped.
func (k *Kubelet) ThawPod(namespace, name string) error {
	return k.signalPod(namespace, name, syscall.SIGCONT)
}

func (k *Kubelet) signalPod(namespace, name string, sig syscall.Signal) error {
	p, err := k.pod(namespace, name)
	if err != nil {
		return err
	}
	p.signal(sig)
	return nil
}

// CutPodNetwork takes the host side of the pod's veth down: the pod keeps
// running but nobody reaches it and it reaches nobody.
func (k *Kubelet) CutPodNetwork(namespace, name string) error {
	return k.setPodLink(namespace, name, false)
}

// RestorePodNetwork undoes CutPodNetwork.
func (k *Kubelet) RestorePodNetwork(namespace, name string) error {
	return k.setPodLink(namespace, name, true)
}

// setPodLink sets the host side of the pod's veth up or down.
func (k *Kubelet) setPodLink(namespace, name string, up bool) error {
	p, err := k.pod(namespace, name)
	if err != nil {
		return err
	}
	slot, ok := p.sandboxSlot()
	if !ok {
		return fmt.Errorf("kubelet: pod %s/%s has no network yet", namespace, name)
	}
	return k.ipam.setLink(slot, up)
}

// PodNetns is the path of the pod's network namespace (/run/netns/…), for a test that opens a
// connection from inside the pod, as its own process would.
func (k *Kubelet) PodNetns(namespace, name string) (string, error) {
	p, err := k.pod(namespace, name)
	if err != nil {
		return "", err
	}
	slot, ok := p.sandboxSlot()
	if !ok {
		return "", fmt.Errorf("kubelet: pod %s/%s has no network yet", namespace, name)
	}
	return "/run/netns/" + k.cfg.Network.netnsName(slot), nil
}

// CgroupDir is the directory of a pod's container's cgroup in controller ("memory", "cpu"), for
// a test that reads what is enforced. It fails without Config.EnforceResources.
func (k *Kubelet) CgroupDir(namespace, name, container, controller string) (string, error) {
	p, err := k.pod(namespace, name)
	if err != nil {
		return "", err
	}
	if k.cg == nil {
		return "", errors.New("kubelet: resources are not enforced (Config.EnforceResources)")
	}
	return k.cg.dir(containerCgroup(p.podCopy(), container), controller)
}

// LogPath is the file that collects stdout and stderr of a pod's container.
func (k *Kubelet) LogPath(namespace, name, container string) (string, error) {
	p, err := k.pod(namespace, name)
	if err != nil {
		return "", err
	}
	return p.logPath(container), nil
}

// VolumePath is the host directory that holds a pod's volume (its files, as the container sees
// them at the mount path), for tests that time how soon a Secret or ConfigMap edit reaches a pod.
func (k *Kubelet) VolumePath(namespace, name, volume string) (string, error) {
	p, err := k.pod(namespace, name)
	if err != nil {
		return "", err
	}
	return filepath.Join(k.podDir(p.podCopy()), "volumes", volume), nil
}

func (k *Kubelet) pod(namespace, name string) (*podRuntime, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.pods[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("kubelet: pod %s/%s is not running on any node", namespace, name)
	}
	return p, nil
}

func (k *Kubelet) podsOn(nodeName string) []*podRuntime {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*podRuntime
	for _, p := range k.pods {
		if p.node == nodeName {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// notifier returns the status callback of the node's running pod controller,
// or nil while the node is down.
func (k *Kubelet) notifier(nodeName string) func(*corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ns, ok := k.nodes[nodeName]; ok {
		return ns.notify
	}
	return nil
}

func (k *Kubelet) buildNode(ns *nodeState) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:       ns.spec.Name,
		corev1.LabelOSStable:       "linux",
		corev1.LabelArchStable:     "amd64",
		"kubernetes.io/role":       "agent",
		"type":                     "valkey-operator-local",
		"node.kubernetes.io/local": "true",
	}
	if ns.spec.Zone != "" {
		labels[corev1.LabelTopologyZone] = ns.spec.Zone
	}
	for key, v := range ns.spec.Labels {
		labels[key] = v
	}
	resources := nodeAllocatable(ns.spec)
	resources[corev1.ResourcePods] = resource.MustParse("250")
	resources[corev1.ResourceEphemeralStorage] = resource.MustParse("1Ti")
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: ns.spec.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: k.cfg.Network.Gateway},
				{Type: corev1.NodeHostName, Address: ns.spec.Name},
			},
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "pods share one local bridge"),
			},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2",
				ContainerRuntimeVersion: "local://processes",
			},
		},
	}
	if port := k.kubeletPort(ns); port != 0 {
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	}
	return n
}

// registerNode creates the node's Node object with its labels, or, when it exists (a node
// started again), leaves its labels as they are. A kubelet sets its node's labels when it
// registers and leaves them to the cluster's admins afterwards: `kubectl label node` sticks.
// virtual-kubelet's node controller instead reconciles the labels of the node it is given on
// every status update (a three-way patch against its last-applied annotation, every
// statusUpdateInterval), which put a test's relabelled zones back under the scheduler's feet.
// So the labels are set here, and the controller is given none; the annotations recording what
// it last applied are dropped from an existing node, so that its first patch, from an empty
// last-applied state, removes no label.
func (k *Kubelet) registerNode(ctx context.Context, ns *nodeState) error {
	nodes := k.client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, k.buildNode(ns), metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch := []byte(`{"metadata":{"annotations":{"` + lastAppliedObjectMeta + `":null,"` + lastAppliedNodeStatus + `":null}}}`)
	_, err = nodes.Patch(ctx, ns.spec.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// The annotations in which virtual-kubelet's node controller records what it last applied.
const (
	lastAppliedObjectMeta = "virtual-kubelet.io/last-applied-object-meta"
	lastAppliedNodeStatus = "virtual-kubelet.io/last-applied-node-status"
)

func (k *Kubelet) kubeletPort(ns *nodeState) int {
	if k.cfg.KubeletPortBase == 0 {
		return 0
	}
	return k.cfg.KubeletPortBase + ns.index
}

// runNode starts the node's virtual-kubelet controllers and waits until both
// are ready. They stop when ctx ends; ns.done is closed once they have.
func (k *Kubelet) runNode(ctx context.Context, ns *nodeState) error {
	name := ns.spec.Name
	done := ns.done
	podFactory := informers.NewSharedInformerFactoryWithOptions(k.client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", name).String()
		}))
	podInformer := podFactory.Core().V1().Pods()

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: k.client.CoreV1().Events(corev1.NamespaceAll)})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: name})
	k.mu.Lock()
	ns.recorder = recorder
	k.mu.Unlock()

	p := &provider{k: k, node: name, pods: podInformer.Lister()}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         k.client.CoreV1(),
		PodInformer:       podInformer,
		EventRecorder:     recorder,
		Provider:          p,
		ConfigMapInformer: k.cmFactory.Core().V1().ConfigMaps(),
		SecretInformer:    k.cmFactory.Core().V1().Secrets(),
		ServiceInformer:   k.cmFactory.Core().V1().Services(),
		// Environment is resolved here, after the pod IP is known, so that
		// status.podIP field references work.
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		close(done)
		broadcaster.Shutdown()
		return err
	}
	if err := k.registerNode(ctx, ns); err != nil {
		close(done)
		broadcaster.Shutdown()
		return err
	}
	// The node controller gets the node without labels: see registerNode.
	statusNode := k.buildNode(ns)
	statusNode.Labels = nil
	nc, err := node.NewNodeController(node.NewNaiveNodeProvider(), statusNode, k.client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease), leaseDurationSeconds),
		node.WithNodeStatusUpdateInterval(statusUpdateInterval))
	if err != nil {
		close(done)
		broadcaster.Shutdown()
		return err
	}
	stopHTTP, err := k.serveKubeletAPI(ctx, ns, podInformer.Lister())
	if err != nil {
		close(done)
		broadcaster.Shutdown()
		return err
	}

	podFactory.Start(ctx.Done())
	ncStarted := make(chan struct{})
	go pc.Run(ctx, 2) //nolint:errcheck // the error is read through pc.Err below
	go func() {
		defer close(done)
		defer broadcaster.Shutdown()
		defer stopHTTP()
		<-pc.Done()
		select {
		case <-ncStarted:
			<-nc.Done()
		default:
		}
	}()
	select {
	case <-pc.Ready():
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	case <-ctx.Done():
		return ctx.Err()
	}
	close(ncStarted)
	go nc.Run(ctx) //nolint:errcheck // the error is read through nc.Err below
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	case <-ctx.Done():
		return ctx.Err()
	}
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return errors.New("pod cache did not sync")
	}
	return nil
}

func (k *Kubelet) podDir(p *corev1.Pod) string {
	return filepath.Join(k.cfg.StateDir, "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
}

func (k *Kubelet) logDir(p *corev1.Pod) string {
	return filepath.Join(k.cfg.StateDir, "logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
}
