// Package simkubelet registers Nodes whose pods run no process: each pod bound to one of them
// gets an address of its own on the loopback network (127.10.0.1, 127.10.0.2, …) where a
// simulated Valkey node (valkeytest.Simulate) listens on port 6379, and is reported Running and
// Ready at once. The operator, a separate process, dials those addresses with its ordinary TCP
// path, so a fleet of thousands of clusters runs against the real API server, scheduler and
// controller manager without thousands of valkey-server processes, network namespaces and
// bridge ports (what bounds the local cluster's own kubelet, package kubelet, to about 1 000
// pods on one machine).
//
// Why loopback and not the Valkey seam in process (valkey.Dialer): the operator must run as its
// own process for its RSS and CPU to be its own; a node per loopback address keeps a pod's
// address what the operator dials, as on a real cluster. Linux routes all of 127.0.0.0/8 to
// the loopback device, so no address has to be configured, and one listener on the wildcard
// address at port 6379 (valkeytest.Fleet.Serve) serves every node by the address dialled: a
// listener per node would take 5 000 of the 20 000 file descriptors a process may hold here
// (the hard limit, which the test cannot raise), beside a connection or two per node.
// Addresses are never reused, so a replacement pod never inherits its predecessor's simulated
// state.
//
// What is not simulated: probes, volumes, logs, exec, restarts, eviction. A pod that is deleted
// loses its node (connections closed) and is removed with grace 0, as a kubelet that stopped
// its container would.
package simkubelet

import (
	"context"
	"crypto/sha1" //nolint:gosec // a node id derived from a pod's UID, not a security use
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// Label marks the simulated Nodes (value "true"): a ValkeyCluster whose
// spec.placement.nodeSelector names it runs on them and nowhere else.
const Label = "valkey-operator.test/simulated"

// Port is where every simulated node listens, as valkey-server's default and the operator's.
const Port = "6379"

// Config is what Start needs.
type Config struct {
	// RESTConfig reaches the API server as an admin. Client-side rate limiting is turned off on
	// a copy: a fleet of thousands of pods is reported Running as fast as the API server takes it.
	RESTConfig *rest.Config
	// Nodes to register, each in its own zone; default: three, sim-a…sim-c in zones sim-zone-a…c.
	Nodes []string
	// PodsPerNode is each Node's pod capacity. Default 2000.
	PodsPerNode int
	// Workers report pod status in parallel. Default 8.
	Workers int
}

// Kubelet runs the simulated Nodes until Stop.
type Kubelet struct {
	cfg    Config
	client kubernetes.Interface
	fleet  *valkeytest.Fleet
	ctx    context.Context
	cancel context.CancelFunc
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   corev1listers.PodLister
	nodes  map[string]bool
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]*simPod // namespace/name
	next    int                // addresses handed out so far
	l       net.Listener       // the fleet's, on the wildcard address at port 6379
}

// simPod is one pod's simulated node.
type simPod struct {
	uid  types.UID
	ip   string
	node *valkeytest.Node
}

// Start registers the Nodes, keeps their leases fresh, and runs the pods bound to them.
func Start(ctx context.Context, cfg Config) (*Kubelet, error) {
	if cfg.RESTConfig == nil {
		return nil, errors.New("simkubelet: RESTConfig is required")
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []string{"sim-a", "sim-b", "sim-c"}
	}
	if cfg.PodsPerNode == 0 {
		cfg.PodsPerNode = 2000
	}
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	rc.QPS, rc.Burst = -1, 0
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("simkubelet: client: %w", err)
	}
	fleet := valkeytest.New()
	fleet.Quiet()
	l, err := net.Listen("tcp", ":"+Port)
	if err != nil {
		return nil, fmt.Errorf("simkubelet: the simulated nodes' port: %w", err)
	}
	go func() { _ = fleet.Serve(l) }()
	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{
		cfg: cfg, client: client, fleet: fleet, ctx: ctx, cancel: cancel, l: l,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		nodes:   map[string]bool{},
		running: map[string]*simPod{},
	}
	for _, n := range cfg.Nodes {
		k.nodes[n] = true
	}
	for i, n := range cfg.Nodes {
		if err := k.register(n, fmt.Sprintf("sim-zone-%c", 'a'+i%26)); err != nil {
			cancel()
			return nil, err
		}
	}
	if err := k.renewLeases(); err != nil {
		cancel()
		return nil, err
	}
	k.wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = k.renewLeases() // a missed renewal is made up 10 s later, well within 40 s
			}
		}
	})
	// Only pods bound to some node: the scheduler's pending ones are none of ours yet.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	inf := factory.Core().V1().Pods()
	k.pods = inf.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		cancel()
		return nil, errors.New("simkubelet: pod cache did not sync")
	}
	for range cfg.Workers {
		k.wg.Go(func() {
			for k.work() {
			}
		})
	}
	return k, nil
}

// Fleet is the simulated Valkey nodes, by address (pod IP:6379). It keeps no calls (Quiet);
// Received counts the commands they were sent.
func (k *Kubelet) Fleet() *valkeytest.Fleet { return k.fleet }

// Running is how many pods have a simulated node now.
func (k *Kubelet) Running() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.running)
}

// Cordon marks the simulated Nodes unschedulable: their pods keep running, and new pods go
// elsewhere (a test that runs after a simulated fleet, in the same local cluster, wants real
// pods).
func (k *Kubelet) Cordon(ctx context.Context) error {
	for n := range k.nodes {
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := k.client.CoreV1().Nodes().Patch(ctx, n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("simkubelet: cordon %s: %w", n, err)
		}
	}
	return nil
}

// Stop closes every simulated node and removes the Nodes and their leases; the pods left on
// them are the garbage collector's (orphaned pods).
func (k *Kubelet) Stop() {
	k.cancel()
	k.queue.ShutDown()
	k.wg.Wait()
	_ = k.l.Close()
	k.mu.Lock()
	for key, p := range k.running {
		p.close()
		delete(k.running, key)
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := range k.nodes {
		_ = k.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		_ = k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n, metav1.DeleteOptions{})
	}
}

// register creates Node name (or takes over one left by an earlier run) and reports it Ready.
func (k *Kubelet) register(name, zone string) error {
	nodes := k.client.CoreV1().Nodes()
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, corev1.LabelOSStable: "linux",
		corev1.LabelArchStable: "amd64", Label: "true",
	}}}
	node, err := nodes.Create(k.ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if node, err = nodes.Get(k.ctx, name, metav1.GetOptions{}); err == nil {
			node.Labels, node.Spec = want.Labels, corev1.NodeSpec{}
			node, err = nodes.Update(k.ctx, node, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("simkubelet: node %s: %w", name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("1000"),
		corev1.ResourceMemory:           resource.MustParse("4Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Ti"),
		corev1.ResourcePods:             resource.MustParse(strconv.Itoa(k.cfg.PodsPerNode)),
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	status := corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-simulated", OperatingSystem: "linux", Architecture: "amd64"},
	}
	// kube-controller-manager taints a Node it has just seen (not ready yet): read it again when
	// the write loses that race.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node.Status = status
		_, err := nodes.UpdateStatus(k.ctx, node, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if cur, getErr := nodes.Get(k.ctx, name, metav1.GetOptions{}); getErr == nil {
				node = cur
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("simkubelet: node %s status: %w", name, err)
	}
	return nil
}

// renewLeases renews every Node's lease: kube-controller-manager takes a Node whose lease is
// older than its grace period (20 s here) for lost and evicts its pods.
func (k *Kubelet) renewLeases() error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	var errs []error
	for n := range k.nodes {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(k.ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(k.ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: corev1.NamespaceNodeLease},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.RenewTime = &now
			_, err = leases.Update(k.ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("simkubelet: lease %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// work syncs one pod from the queue; false once the queue is shut down.
func (k *Kubelet) work() bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(key); err != nil && k.ctx.Err() == nil {
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync brings pod key to what the simulated kubelet wants: a node listening and the pod
// reported Running and Ready with its address, or, once the pod is deleted, no node and no pod.
func (k *Kubelet) sync(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.release(key, "")
		return nil
	} else if err != nil {
		return err
	}
	if !k.nodes[pod.Spec.NodeName] {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		k.release(key, pod.UID)
		err := k.client.CoreV1().Pods(ns).Delete(k.ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	p, err := k.start(key, pod.UID)
	if err != nil {
		return err
	}
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP == p.ip {
		return nil
	}
	_, err = k.client.CoreV1().Pods(ns).UpdateStatus(k.ctx, running(pod, p.ip), metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// start returns pod key's simulated node, starting it on a new address the first
// time (or when the name now belongs to another pod).
func (k *Kubelet) start(key string, uid types.UID) (*simPod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.running[key]; ok {
		if p.uid == uid {
			return p, nil
		}
		p.close()
		delete(k.running, key)
	}
	k.next++
	ip := loopbackIP(k.next)
	sum := sha1.Sum([]byte(uid)) //nolint:gosec // see the import
	node := valkeytest.Simulate(k.fleet.Node(net.JoinHostPort(ip, Port)), hex.EncodeToString(sum[:]), ip)
	p := &simPod{uid: uid, ip: ip, node: node}
	k.running[key] = p
	return p, nil
}

// release stops pod key's node, if it has one (of that uid, unless uid is empty).
func (k *Kubelet) release(key string, uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.running[key]; ok && (uid == "" || p.uid == uid) {
		p.close()
		delete(k.running, key)
	}
}

func (p *simPod) close() { p.node.Down(true) }

// loopbackIP is the n-th address (from 1) of 127.10.0.0 and up, skipping .0 and .255 in the
// last byte: 127.10.0.1 … 127.10.0.254, 127.10.1.1, …
func loopbackIP(n int) string {
	n--
	block, host := n/254, n%254+1
	return fmt.Sprintf("127.%d.%d.%d", 10+block/256, block%256, host)
}

// running is pod as a kubelet reports it once its containers run and are ready, at ip.
func running(pod *corev1.Pod, ip string) *corev1.Pod {
	pod = pod.DeepCopy()
	now := metav1.Now()
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	st.StartTime = &now
	st.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "simulated://" + c.Image, ContainerID: "simulated://" + string(pod.UID) + "/" + c.Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "simulated://" + c.Image, ContainerID: "simulated://" + string(pod.UID) + "/" + c.Name,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return pod
}
