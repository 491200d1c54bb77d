package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// A Twin is the baseline of a managed cluster: the same Valkey processes, with no operator. Its
// pods are copies of the managed cluster's own pod (image, command, valkey.conf, ACL file and
// credentials, probes, preStop hook, resources), in the same namespace, pinned to the Kubernetes
// nodes its managed counterparts run on, and formed by hand (CLUSTER MEET, ADDSLOTSRANGE,
// REPLICATE), as valkey-cli --cluster create would. Nothing of the operator's reads them: they
// carry none of its labels and no owner, so a fault injected into both at the same moment, on
// the same machine under the same load, shows what Valkey alone does beside what the operator
// adds. A twin does not heal: after a fault it is built again (Rebuild).
type Twin struct {
	Name, Namespace  string
	Shards, Replicas int
	// Writer writes to the twin as the managed cluster's writer does (WriterOptions), from
	// Build on; its refusals are the baseline's windows.
	Writer *Writer

	o     TwinOptions
	creds valkey.Credentials
	pods  []string // the pods of this build, by shard then index
}

// TwinOptions say what a Twin copies and how it is reached.
type TwinOptions struct {
	K8s client.Client
	// Managed is the managed cluster to copy (its running pods, their ConfigMaps, its ACL
	// Secret and operator credentials).
	Managed *v1.ValkeyCluster
	// Name names the twin's pods, its Service and its Secret ("twin").
	Name string
	// Shards and Replicas are the twin's shape; zero: the managed cluster's spec.
	Shards, Replicas int
	// CA signs the twin's certificate when the managed cluster runs TLS (its nodes announce and
	// are verified under the twin's own names).
	CA *CA
	// Dialer resolves through the cluster DNS (a TLS twin's writer reaches it by name).
	Dialer *net.Dialer
	// Writer is the writer's template (credentials, interval, sample of WAIT); the twin sets
	// its addresses, TLS and prefix.
	Writer WriterOptions
	// Nodes, when set, gives the Kubernetes node of each twin pod by shard and index (0 the
	// primary); otherwise the twin mirrors where the managed cluster's primaries and replicas
	// run, and a node that is not Ready is replaced by one that is.
	Nodes map[[2]int]string
	// Avoid, when set, names Kubernetes nodes known to be down though the API still says Ready
	// (a node stopped a moment ago): no twin pod is placed there.
	Avoid func() []string
}

// TwinLabel is the label every twin object carries, with the twin's name.
const TwinLabel = "valkey-test/twin"

// BuildTwin creates and forms a twin of o.Managed, waits until Valkey says it is whole (every
// slot served, every replica synced) and starts its writer.
func BuildTwin(ctx context.Context, o TwinOptions) (*Twin, error) {
	if o.Shards == 0 {
		o.Shards, o.Replicas = int(o.Managed.Spec.Shards), int(o.Managed.Spec.ReplicasPerShard)
	}
	t := &Twin{Name: o.Name, Namespace: o.Managed.Namespace, Shards: o.Shards, Replicas: o.Replicas, o: o}
	if err := t.form(ctx); err != nil {
		t.Delete(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("twin %s/%s: %w", t.Namespace, t.Name, err)
	}
	return t, nil
}

// Service is the twin's headless Service name in the cluster DNS.
func (t *Twin) serviceHost() string {
	return t.Name + "." + t.Namespace + ".svc." + localcluster.ClusterDomain
}

// form creates the twin's objects and forms it.
func (t *Twin) form(ctx context.Context) error {
	o := t.o
	managed, err := ClusterPods(ctx, o.K8s, o.Managed)
	if err != nil {
		return err
	}
	if len(managed) == 0 {
		return errors.New("the managed cluster runs no pod to copy")
	}
	// The newest pod is of the spec the cluster is going to: in the middle of a roll an old pod
	// may not start beside the ACL file the operator renders for the new version.
	sort.Slice(managed, func(i, j int) bool {
		return managed[i].CreationTimestamp.After(managed[j].CreationTimestamp.Time) ||
			(managed[i].CreationTimestamp.Equal(&managed[j].CreationTimestamp) && managed[i].Name < managed[j].Name)
	})
	tpl := managed[0]
	var cm corev1.ConfigMap
	if err := o.K8s.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: v1.NodeConfigMapName(tpl.Name)}, &cm); err != nil {
		return fmt.Errorf("config of %s: %w", tpl.Name, err)
	}
	conf := cm.Data[resources.ConfigFileName]
	if t.creds, err = OperatorCreds(ctx, o.K8s, o.Managed); err != nil {
		return err
	}
	tlsMode := o.Managed.Spec.TLS != nil
	placement, err := t.placement(ctx, managed)
	if err != nil {
		return err
	}
	labels := map[string]string{TwinLabel: t.Name}
	objs := []client.Object{&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "valkey", Port: resources.ClientPort}}},
	}}
	if tlsMode {
		if o.CA == nil {
			return errors.New("a TLS cluster's twin needs the CA")
		}
		crt, key, err := o.CA.Leaf(t.serviceHost(), LeafOptions{})
		if err != nil {
			return err
		}
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: t.Name + "-tls", Namespace: t.Namespace, Labels: labels},
			Type: corev1.SecretTypeTLS, Data: TLSSecretData(crt, key, o.CA)})
	}
	suffix := strconv.FormatUint(rand.Uint64()%1e6, 36)
	t.pods = nil
	for s := range t.Shards {
		for i := range t.Replicas + 1 {
			name := fmt.Sprintf("%s-%s-%d-%d", t.Name, suffix, s, i)
			t.pods = append(t.pods, name)
			nodeConf := conf
			if tlsMode {
				nodeConf = announce(conf, name+"."+t.serviceHost())
			}
			objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1.NodeConfigMapName(name), Namespace: t.Namespace, Labels: labels},
				Data: map[string]string{resources.ConfigFileName: nodeConf}}, t.pod(tpl, name, s, placement[[2]int{s, i}]))
		}
	}
	for _, obj := range objs {
		if err := o.K8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return t.join(ctx)
}

// announce replaces valkey.conf's cluster-announce-hostname with host.
func announce(conf, host string) string {
	lines := strings.Split(conf, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "cluster-announce-hostname ") {
			lines[i] = "cluster-announce-hostname " + host
		}
	}
	return strings.Join(lines, "\n")
}

// pod is the twin pod name of shard, a copy of the managed pod tpl pinned to node.
func (t *Twin) pod(tpl corev1.Pod, name string, shard int, node string) *corev1.Pod {
	spec := tpl.Spec.DeepCopy()
	spec.NodeName, spec.Hostname, spec.Subdomain = node, name, t.Name
	spec.Affinity, spec.TopologySpreadConstraints, spec.NodeSelector = nil, nil, nil
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		switch {
		case v.ConfigMap != nil:
			v.ConfigMap.Name = v1.NodeConfigMapName(name)
		case v.Secret != nil && v.Name == "tls":
			v.Secret.SecretName = t.Name + "-tls"
		}
	}
	spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace,
		Labels: map[string]string{TwinLabel: t.Name, TwinLabel + "-shard": strconv.Itoa(shard)}}, Spec: *spec}
}

// placement is the Kubernetes node of each twin pod (shard, index): TwinOptions.Nodes, else
// where the managed cluster's copies run now (its primary of each shard at index 0, its
// replicas after it, by name), a node that is not Ready replaced by the next one that is.
func (t *Twin) placement(ctx context.Context, managed []corev1.Pod) (map[[2]int]string, error) {
	if t.o.Nodes != nil {
		return t.o.Nodes, nil
	}
	var nodes corev1.NodeList
	if err := t.o.K8s.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var ready []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !n.Spec.Unschedulable && (t.o.Avoid == nil || !slices.Contains(t.o.Avoid(), n.Name)) {
				ready = append(ready, n.Name)
			}
		}
	}
	slices.Sort(ready)
	if len(ready) == 0 {
		return nil, errors.New("no Kubernetes node is Ready")
	}
	creds, err := t.managedCreds(managed)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(managed))
	for i, p := range managed {
		addrs[i] = PodAddr(p)
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	views := valkey.Observe(octx, addrs, creds)
	cancel()
	byShard := map[int][]string{} // nodes of each shard's copies, the primary first
	for i, p := range managed {
		shard, err := strconv.Atoi(p.Labels[v1.LabelShard])
		if err != nil {
			continue
		}
		me, _ := views[i].Myself()
		if views[i].Reachable && me.Role == valkey.RolePrimary && len(me.Slots) > 0 {
			byShard[shard] = append([]string{p.Spec.NodeName}, byShard[shard]...)
		} else {
			byShard[shard] = append(byShard[shard], p.Spec.NodeName)
		}
	}
	out := map[[2]int]string{}
	next := 0
	for s := range t.Shards {
		for i := range t.Replicas + 1 {
			node := ""
			if i < len(byShard[s]) && slices.Contains(ready, byShard[s][i]) {
				node = byShard[s][i]
			}
			if node == "" {
				node = ready[next%len(ready)]
				next++
			}
			out[[2]int{s, i}] = node
		}
	}
	return out, nil
}

// managedCreds are the operator's credentials for the managed cluster's pods.
func (t *Twin) managedCreds(pods []corev1.Pod) (valkey.Credentials, error) {
	if t.o.Managed.Spec.TLS == nil {
		return t.creds, nil
	}
	return TLSCreds(t.creds, t.o.Managed, pods, t.o.CA.Roots()), nil
}

// Pods are the twin's pods that run now, by name.
func (t *Twin) Pods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := t.o.K8s.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingLabels{TwinLabel: t.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil && slices.Contains(t.pods, p.Name) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// notRunning says why the first of this build's pods that does not run does not (its phase,
// node and container state), "" when all run.
func (t *Twin) notRunning(ctx context.Context) string {
	var list corev1.PodList
	if err := t.o.K8s.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingLabels{TwinLabel: t.Name}); err != nil {
		return ""
	}
	for _, p := range list.Items {
		if !slices.Contains(t.pods, p.Name) || (p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "") {
			continue
		}
		why := fmt.Sprintf("; %s %s on %s", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				why += fmt.Sprintf(", waiting: %s %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				why += fmt.Sprintf(", terminated: %s (exit %d) %s", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			}
		}
		return why
	}
	return ""
}

// Creds are the operator's credentials for pods of the twin, over TLS for a TLS twin.
func (t *Twin) Creds(pods []corev1.Pod) valkey.Credentials {
	if t.o.Managed.Spec.TLS == nil {
		return t.creds
	}
	return TLSCreds(t.creds, &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace}}, pods, t.o.CA.Roots())
}

// Roots are the CA certificates a TLS twin's nodes are verified with (nil without TLS).
func (t *Twin) Roots() *x509.CertPool {
	if t.o.CA == nil {
		return nil
	}
	return t.o.CA.Roots()
}

// join forms the created pods into a cluster, waits until Valkey says it is whole and starts
// the writer.
func (t *Twin) join(ctx context.Context) error {
	want := t.Shards * (t.Replicas + 1)
	var pods []corev1.Pod
	if why := Poll(ctx, time.Minute, func() string {
		var err error
		if pods, err = t.Pods(ctx); err != nil {
			return err.Error()
		}
		if len(pods) != want {
			return fmt.Sprintf("%d of %d pods run%s", len(pods), want, t.notRunning(ctx))
		}
		return ""
	}); why != "" {
		return fmt.Errorf("pods: %s", why)
	}
	creds := t.Creds(pods)
	clients := map[string]*valkey.Client{}
	ids := map[string]string{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	byName := map[string]corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
		if why := Poll(ctx, time.Minute, func() string {
			c, err := valkey.NewClient(PodAddr(p), creds)
			if err != nil {
				return err.Error()
			}
			id, err := c.MyID(ctx)
			if err != nil {
				c.Close()
				return err.Error()
			}
			clients[p.Name], ids[p.Name] = c, id
			return ""
		}); why != "" {
			return fmt.Errorf("%s: %s", p.Name, why)
		}
	}
	seed := clients[t.pods[0]]
	for _, name := range t.pods[1:] {
		if err := seed.Meet(ctx, byName[name].Status.PodIP, resources.ClientPort, resources.BusPort); err != nil {
			return err
		}
	}
	addrs := make([]string, len(pods))
	for i, p := range pods {
		addrs[i] = PodAddr(p)
	}
	if why := Poll(ctx, time.Minute, func() string {
		for _, v := range valkey.Observe(ctx, addrs, creds) {
			if n := v.ClusterInfo["cluster_known_nodes"]; n != strconv.Itoa(want) {
				return fmt.Sprintf("%s knows %s nodes", v.Addr, n)
			}
		}
		return ""
	}); why != "" {
		return fmt.Errorf("meet: %s", why)
	}
	spread := slot.EvenSpread(t.Shards)
	for s := range t.Shards {
		if err := clients[t.pods[s*(t.Replicas+1)]].AddSlotsRange(ctx, slot.Set{spread[s]}); err != nil {
			return err
		}
	}
	if why := Poll(ctx, time.Minute, func() string {
		for _, v := range valkey.Observe(ctx, addrs, creds) {
			if !v.ClusterStateOK() {
				return v.Addr + " not ok"
			}
		}
		return ""
	}); why != "" {
		return fmt.Errorf("slots: %s", why)
	}
	for s := range t.Shards {
		primary := ids[t.pods[s*(t.Replicas+1)]]
		for i := 1; i <= t.Replicas; i++ {
			if err := clients[t.pods[s*(t.Replicas+1)+i]].Replicate(ctx, primary); err != nil {
				return err
			}
		}
	}
	if why := Poll(ctx, 2*time.Minute, func() string {
		return ValkeyHealthy(ctx, addrs, creds, t.Shards, t.Replicas)
	}); why != "" {
		return fmt.Errorf("whole: %s", why)
	}
	opts := t.o.Writer
	opts.Prefix = "twin:" + opts.Prefix
	opts.Dialer = t.o.Dialer
	if t.o.Managed.Spec.TLS != nil {
		opts.Addrs = []string{net.JoinHostPort(t.serviceHost(), "6379")}
		opts.TLS = &tls.Config{RootCAs: t.Roots(), MinVersion: tls.VersionTLS12}
	} else {
		opts.Addrs = addrs
	}
	w, err := StartWriter(opts)
	if err != nil {
		return err
	}
	if err := w.WaitAcked(5, time.Minute); err != nil {
		w.Close()
		return err
	}
	t.Writer = w
	return nil
}

// Healthy is "" while Valkey says the twin is whole, else what is not.
func (t *Twin) Healthy(ctx context.Context) string {
	pods, err := t.Pods(ctx)
	if err != nil {
		return err.Error()
	}
	addrs := make([]string, len(pods))
	for i, p := range pods {
		addrs[i] = PodAddr(p)
	}
	return ValkeyHealthy(ctx, addrs, t.Creds(pods), t.Shards, t.Replicas)
}

// Resolve is the twin's pod now serving shard's slots (primary) or its pick-th replica by name
// (replica), as the chaos schedule names a target.
func (t *Twin) Resolve(ctx context.Context, shard int, primary bool, pick int) (corev1.Pod, error) {
	pods, err := t.Pods(ctx)
	if err != nil {
		return corev1.Pod{}, err
	}
	var mine []corev1.Pod
	for _, p := range pods {
		if p.Labels[TwinLabel+"-shard"] == strconv.Itoa(shard%t.Shards) {
			mine = append(mine, p)
		}
	}
	if p, ok := pickByRole(ctx, mine, t.Creds(pods), primary, pick); ok {
		return p, nil
	}
	return corev1.Pod{}, fmt.Errorf("twin shard %d has no reachable %s", shard%t.Shards, roleWord(primary))
}

// Delete stops the writer and deletes every object of the twin (those of earlier builds too).
func (t *Twin) Delete(ctx context.Context) {
	if t.Writer != nil {
		t.Writer.Close()
	}
	sel := client.MatchingLabels{TwinLabel: t.Name}
	ns := client.InNamespace(t.Namespace)
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}} {
		if err := t.o.K8s.List(ctx, list, ns, sel); err != nil {
			continue
		}
		var objs []client.Object
		switch l := list.(type) {
		case *corev1.PodList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *corev1.ConfigMapList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *corev1.SecretList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *corev1.ServiceList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, obj := range objs {
			_ = t.o.K8s.Delete(ctx, obj, client.GracePeriodSeconds(0))
		}
	}
}

// Rebuild deletes the twin and builds it again, shaped as the managed cluster's spec is now
// (shards, replicas) from its pods as they are now (image, config), its writer from writer:
// after a fault, the baseline starts the next one whole, as the managed cluster does once
// healed.
func (t *Twin) Rebuild(ctx context.Context, writer WriterOptions) error {
	t.Delete(ctx)
	t.o.Writer = writer
	var vc v1.ValkeyCluster
	if err := t.o.K8s.Get(ctx, client.ObjectKeyFromObject(t.o.Managed), &vc); err != nil {
		return err
	}
	t.o.Managed = &vc
	t.Shards, t.Replicas = int(vc.Spec.Shards), int(vc.Spec.ReplicasPerShard)
	t.Writer = nil
	// Old pods go with grace 0: wait until they are gone, so that their IPs and names do not
	// mix with the new build's.
	if why := Poll(ctx, time.Minute, func() string {
		var list corev1.PodList
		if err := t.o.K8s.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingLabels{TwinLabel: t.Name}); err != nil {
			return err.Error()
		}
		if n := len(list.Items); n > 0 {
			return fmt.Sprintf("%d old pods left", n)
		}
		return ""
	}); why != "" {
		return errors.New(why)
	}
	return t.form(ctx)
}

// Describe is the twin's layout for a log: pod, node, role.
func (t *Twin) Describe(ctx context.Context) string {
	pods, err := t.Pods(ctx)
	if err != nil {
		return err.Error()
	}
	nodes := map[string][]string{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = append(nodes[p.Spec.NodeName], p.Name)
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		parts = append(parts, n+": "+strings.Join(nodes[n], " "))
	}
	return strings.Join(parts, "; ")
}

// OnNode are the names of the twin's pods running on node and how many of them serve slots
// now: what a stop of that node takes from the twin, read before the stop.
func (t *Twin) OnNode(ctx context.Context, node string) ([]string, int, error) {
	pods, err := t.Pods(ctx)
	if err != nil {
		return nil, 0, err
	}
	var on []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == node {
			on = append(on, p)
		}
	}
	names := make([]string, len(on))
	addrs := make([]string, len(on))
	for i, p := range on {
		names[i], addrs[i] = p.Name, PodAddr(p)
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	views := valkey.Observe(octx, addrs, t.Creds(pods))
	cancel()
	primaries := 0
	for _, v := range views {
		if v.ServesSlots() {
			primaries++
		}
	}
	return names, primaries, nil
}
