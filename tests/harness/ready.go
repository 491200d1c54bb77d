package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/valkey"
)

// What the failover tests expect the operator to say, in one place: when the implementation of
// issue 8 settles on its names, change them here.
const (
	// takeoverMsg is logged when the operator issues CLUSTER FAILOVER TAKEOVER.
	TakeoverMsg = logging.MsgNoQuorumTakeover
	// dataLostCondition is the condition type that says a shard lost every copy of its data;
	// a condition of any type with reason dataLostReason counts as well.
	DataLostCondition = v1.ConditionDataLost
	DataLostReason    = controllers.ReasonShardDataLost
	// dataLostWarn is the WARN line's message for a shard served again empty.
	DataLostWarn = logging.MsgShardDataLost
	// healTimeout bounds a wait for Ready after a fault: a safety net, not a speed claim
	// (the benchmarks measure speed).
	HealTimeout = 4 * time.Minute
)

// FailoverLine reports whether a log line's message says the operator started a failover
// (FORCE, graceful or TAKEOVER), as opposed to waiting for Valkey's own.
func FailoverLine(msg string) bool {
	m := strings.ToLower(msg)
	// A failover that spreads primaries over zones is a graceful handover of a healthy cluster
	// once the fault is healed (plan/spread.go), not an answer to the fault.
	if msg == logging.MsgPrimaryUnhealthyWaiting || msg == logging.MsgSpreadingPrimaries || strings.Contains(m, "waiting") {
		return false
	}
	return strings.Contains(m, "failover") || strings.Contains(m, "takeover")
}

// Cordon marks the Kubernetes node unschedulable, or schedulable again.
func Cordon(t *testing.T, node string, unschedulable bool) {
	t.Helper()
	var n corev1.Node
	if err := K8s.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = unschedulable
	if err := K8s.Patch(context.Background(), &n, patch); err != nil {
		t.Fatal(err)
	}
}

// RestartOperator SIGKILLs the operator and starts a new one, appending to the same log.
func RestartOperator(t testing.TB) {
	t.Helper()
	Op.Kill(syscall.SIGKILL)
	var err error
	if Op, err = StartOperator(OperatorBinary, Cluster, WorkDir, "operator", "RUST_LOG=info"); err != nil {
		t.Fatal(err)
	}
}

// Helpers: the writer, readiness as Kubernetes and Valkey both see it.

// StartClusterWriter starts a harness.Writer on vc's pods; it is closed at the end of the test.
func StartClusterWriter(t testing.TB, vc *v1.ValkeyCluster) (*Writer, WriterOptions) {
	t.Helper()
	return StartWriterPrefix(t, vc, vc.Namespace+":")
}

// ClusterWriterOptions seeds a cluster client with vc's running pods. The default user is as Valkey
// ships it (no spec.acl), as roundTripKeys uses it. A TLS cluster's client is seeded with the
// Service's name instead, trusts the ca.crt of vc's TLS Secret and resolves through the cluster
// DNS (its nodes redirect by hostname).
func ClusterWriterOptions(t testing.TB, vc *v1.ValkeyCluster, prefix string) WriterOptions {
	t.Helper()
	if vc.Spec.TLS != nil {
		return WriterOptions{Addrs: []string{net.JoinHostPort(ServiceHost(vc), "6379")}, Prefix: prefix,
			TLS: &tls.Config{RootCAs: SecretRoots(t, vc), MinVersion: tls.VersionTLS12}, Dialer: Cluster.Dialer()}
	}
	var addrs []string
	for _, p := range Pods(t, vc) {
		addrs = append(addrs, PodAddr(p))
	}
	return WriterOptions{Addrs: addrs, Prefix: prefix}
}

// FinishWriter stops w, reads back every acknowledged key through the cluster's current pods,
// logs the report and fails the test if a key that a replica acknowledged is gone or a slot
// does not answer. Unreplicated losses are logged, not failures.
func FinishWriter(t testing.TB, w *Writer, vc *v1.ValkeyCluster, opts WriterOptions) Report {
	t.Helper()
	read := ClusterWriterOptions(t, vc, opts.Prefix)
	read.Username, read.Password = opts.Username, opts.Password // the writer's user reads back
	return ReadBackWriter(t, w, read)
}

// ReadBackWriter is finishWriter with the read-back options given (a TLS cluster's, say).
func ReadBackWriter(t testing.TB, w *Writer, read WriterOptions) Report {
	t.Helper()
	r, err := w.Report(context.Background(), read)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.String())
	if r.LostReplicated > 0 {
		t.Errorf("%d keys acknowledged by WAIT 1 were lost", r.LostReplicated)
	}
	if r.ReadErrors > 0 {
		t.Errorf("%d acknowledged keys could not be read back", r.ReadErrors)
	}
	if r.LostUnreplicated > 0 {
		t.Logf("%d keys acknowledged by the primary alone were lost (allowed in a crash failover)", r.LostUnreplicated)
	}
	return r
}

func CurrentCluster(t testing.TB, vc *v1.ValkeyCluster) *v1.ValkeyCluster {
	t.Helper()
	var cur v1.ValkeyCluster
	if err := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	return &cur
}

// WaitReady waits until the Ready condition is True for the current generation and Valkey
// agrees (ClusterHealthy), ignoring the pods in exclude (lost ones), and returns when.
func WaitReady(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, exclude map[string]bool, timeout time.Duration) time.Time {
	t.Helper()
	problem := Poll(t.Context(), timeout, func() string {
		var cur v1.ValkeyCluster
		err := K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur)
		switch {
		case err != nil:
			return err.Error()
		case !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady):
			return fmt.Sprintf("not Ready: state %s, message %q", cur.Status.State, cur.Status.Message)
		case cur.Status.ObservedGeneration != cur.Generation:
			return fmt.Sprintf("observedGeneration %d, generation %d", cur.Status.ObservedGeneration, cur.Generation)
		}
		if problem := ClusterHealthy(t, vc, shards, replicas, exclude); problem != "" {
			return "Ready, but Valkey disagrees: " + problem
		}
		return ""
	})
	if problem != "" {
		logValkeyViews(t, vc)
		t.Fatalf("%s/%s not Ready within %s: %s", vc.Namespace, vc.Name, timeout, problem)
	}
	return time.Now()
}

// logValkeyViews logs what each running pod's node says of the cluster: the evidence when a
// cluster did not become Ready.
func logValkeyViews(t testing.TB, vc *v1.ValkeyCluster) {
	t.Helper()
	var addrs, names []string
	for _, p := range Pods(t, vc) {
		addrs, names = append(addrs, PodAddr(p)), append(names, p.Name)
	}
	for i, v := range valkey.Observe(context.Background(), addrs, Creds(t, vc)) {
		var b strings.Builder
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "\n    %.8s %s %v primary=%.8s slots=%v", n.ID, n.IP, n.Flags, n.PrimaryID, n.Slots)
		}
		t.Logf("%s %s: reachable %v (%v) cluster_state %s slots_assigned %s link %s%s", names[i], v.Addr, v.Reachable, v.Err,
			v.ClusterInfo["cluster_state"], v.ClusterInfo["cluster_slots_assigned"], v.Replication["master_link_status"], b.String())
	}
}

// ClusterHealthy is harness.ValkeyHealthy on vc's running pods but those in exclude (lost ones).
func ClusterHealthy(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, exclude map[string]bool) string {
	t.Helper()
	var addrs []string
	for _, p := range Pods(t, vc) {
		if !exclude[p.Name] {
			addrs = append(addrs, PodAddr(p))
		}
	}
	return ValkeyHealthy(context.Background(), addrs, Creds(t, vc), shards, replicas)
}

// Primaries returns the primaries of status.nodeDetails, by pod name.
func Primaries(t *testing.T, vc *v1.ValkeyCluster) []v1.NodeStatus {
	t.Helper()
	var out []v1.NodeStatus
	for _, n := range CurrentCluster(t, vc).Status.NodeDetails {
		if n.Role == v1.NodeRolePrimary {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	if len(out) < 2 {
		t.Fatalf("%d primaries in status.nodeDetails", len(out))
	}
	return out
}

// ObjectMetaNS is the metadata of ns/name.
func ObjectMetaNS(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
