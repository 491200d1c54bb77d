package network

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// dialTimeout is how long a connection attempt waits for an answer: a dropped SYN never gets
// one, an accepted connection gets one in milliseconds.
const dialTimeout = 2 * time.Second

// meetWatch is how long a refused MEET is watched for: the stranger retries its handshake for
// cluster-node-timeout (5 s) before it gives up; twice that, and the handshake is over.
const meetWatch = 2 * resources.ClusterNodeTimeoutMS * time.Millisecond

// TestBusClosedToStrangers: a 2×1 cluster with its NetworkPolicy, beside two 1×0 clusters that
// play strangers (their own policy turned off, as an attacker would): one in another namespace,
// one in the same namespace. Neither stranger's pod can open the bus port of any of the
// cluster's pods (a real packet dropped by the enforcer), though both reach its client port; a
// CLUSTER MEET they send never puts them in any node's CLUSTER NODES. The cluster's own pods
// still gossip: a primary deleted under the writer hands over with no write refused, and a
// reshard to 3 shards moves its slots with every acknowledged key read back. The policy is put
// back after a deletion and after an edit. Last, the cluster's policy turned off (proof the test
// can fail): the stranger's connection is accepted and its MEET lists it in CLUSTER NODES.
func TestBusClosedToStrangers(t *testing.T) {
	const ns, otherNS = "net-team", "net-other"
	harness.SetupNamespace(t, ns)
	harness.SetupNamespace(t, otherNS)
	harness.Create(t, harness.NewImage("net-image"), harness.NewConfig("net-config", "net-image"))
	off := func(c *v1.ValkeyCluster) { c.Spec.Network = &v1.Network{Policy: v1.NetworkPolicyDisabled} }
	vc := harness.NewCluster(ns, "vc", "net-config", harness.WithShards(2), harness.WithReplicas(1))
	stranger := harness.NewCluster(otherNS, "stranger", "net-config", harness.WithShards(1), harness.WithReplicas(0), off)
	neighbour := harness.NewCluster(ns, "neighbour", "net-config", harness.WithShards(1), harness.WithReplicas(0), off)
	harness.Create(t, vc, stranger, neighbour)
	harness.WaitReady(t, vc, 2, 1, nil, harness.FormTimeout)
	harness.WaitReady(t, stranger, 1, 0, nil, harness.FormTimeout)
	harness.WaitReady(t, neighbour, 1, 0, nil, harness.FormTimeout)
	policy := waitPolicy(t, vc, "")

	strangers := []*v1.ValkeyCluster{stranger, neighbour}
	for _, s := range strangers {
		from := harness.Pods(t, s)[0]
		for _, p := range harness.Pods(t, vc) {
			bus, client := net.JoinHostPort(p.Status.PodIP, "16379"), harness.PodAddr(p)
			// The enforcer learns of a pod from the API: wait, within bounds, for it to judge.
			harness.WaitFor(t, "the bus of "+p.Name+" closed to "+from.Namespace+"/"+from.Name, 30*time.Second, func() string {
				if err := harness.DialFromPod(from.Namespace, from.Name, bus, dialTimeout); err == nil {
					return "connection accepted"
				}
				return ""
			})
			if err := harness.DialFromPod(from.Namespace, from.Name, client, dialTimeout); err != nil {
				t.Errorf("%s/%s cannot reach the client port of %s: %v (the policy leaves it open)", from.Namespace, from.Name, p.Name, err)
			}
		}
	}
	for _, s := range strangers {
		if id := meet(t, s, vc); waitListed(t, vc, id, meetWatch) {
			t.Errorf("%s/%s (node %s) is in the cluster's CLUSTER NODES after its MEET", s.Namespace, s.Name, id)
		}
	}

	t.Run("its own pods fail over under the writer", func(t *testing.T) {
		w, opts := harness.StartClusterWriter(t, vc)
		victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
		if err := harness.K8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: harness.ObjectMetaNS(ns, victim)}); err != nil {
			t.Fatal(err)
		}
		harness.WaitReady(t, vc, 2, 1, map[string]bool{victim: true}, harness.HealTimeout)
		if err := w.WaitAcked(20, time.Minute); err != nil {
			t.Error(err)
		}
		harness.CheckNoRefusal(t, harness.FinishWriter(t, w, vc, opts))
	})
	t.Run("its own pods reshard", func(t *testing.T) {
		w, opts := harness.StartClusterWriter(t, vc)
		harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 3 })
		harness.WaitScaled(t, vc, 3, 1, harness.RollTimeout)
		harness.CheckEvenSpread(t, vc, 3)
		if r := harness.FinishWriter(t, w, vc, opts); r.LostUnreplicated > 0 {
			t.Errorf("%d acknowledged keys lost: slot moves lose none", r.LostUnreplicated)
		}
		harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
	})
	t.Run("put back after a deletion and an edit", func(t *testing.T) {
		if err := harness.K8s.Delete(context.Background(), policy); err != nil {
			t.Fatal(err)
		}
		policy = waitPolicy(t, vc, policy.UID)
		open := policy.DeepCopy()
		open.Spec.Ingress = append(open.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		if err := harness.K8s.Update(context.Background(), open); err != nil {
			t.Fatal(err)
		}
		harness.WaitFor(t, "the edited policy put back", time.Minute, func() string {
			var cur networkingv1.NetworkPolicy
			if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(policy), &cur); err != nil {
				return err.Error()
			}
			if len(cur.Spec.Ingress) != len(policy.Spec.Ingress) {
				return strconv.Itoa(len(cur.Spec.Ingress)) + " ingress rules"
			}
			return ""
		})
	})

	// Proof the checks above can fail: without the policy, the stranger gets in.
	harness.EditCluster(t, vc, off)
	harness.WaitFor(t, "the policy deleted", time.Minute, func() string {
		err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(policy), &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return "still there"
	})
	from := harness.Pods(t, stranger)[0]
	target := harness.Pods(t, vc)[0]
	harness.WaitFor(t, "the bus open to the stranger", 30*time.Second, func() string {
		if err := harness.DialFromPod(from.Namespace, from.Name, net.JoinHostPort(target.Status.PodIP, "16379"), dialTimeout); err != nil {
			return err.Error()
		}
		return ""
	})
	if id := meet(t, stranger, vc); !waitListed(t, vc, id, 30*time.Second) {
		t.Errorf("without the policy, the stranger's MEET did not list it (node %s): the checks above prove nothing", id)
	}
}

// waitPolicy waits for the cluster's NetworkPolicy, one whose UID is not old, and returns it.
func waitPolicy(t *testing.T, vc *v1.ValkeyCluster, old types.UID) *networkingv1.NetworkPolicy {
	t.Helper()
	var np networkingv1.NetworkPolicy
	key := client.ObjectKey{Namespace: vc.Namespace, Name: v1.NetworkPolicyName(vc.Name)}
	harness.WaitFor(t, "NetworkPolicy "+key.Name, time.Minute, func() string {
		if err := harness.K8s.Get(context.Background(), key, &np); err != nil {
			return err.Error()
		}
		if np.UID == old {
			return "the deleted one"
		}
		if !metav1.IsControlledBy(&np, vc) && !controlledByName(&np, vc.Name) {
			return "not controlled by the cluster"
		}
		return ""
	})
	return &np
}

func controlledByName(obj metav1.Object, name string) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.Kind == "ValkeyCluster" && ref.Name == name
}

// meet has the stranger's node introduce itself to every pod of vc (CLUSTER MEET, sent to the
// stranger through its open default user) and returns the stranger's node id.
func meet(t *testing.T, stranger, vc *v1.ValkeyCluster) string {
	t.Helper()
	c := nodeClient(t, harness.Pods(t, stranger)[0])
	ctx := context.Background()
	id, err := c.Do(ctx, c.B().ClusterMyid().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range harness.Pods(t, vc) {
		if err := c.Do(ctx, c.B().ClusterMeet().Ip(p.Status.PodIP).Port(6379).ClusterBusPort(16379).Build()).Error(); err != nil {
			t.Fatalf("MEET %s from the stranger: %v", p.Name, err)
		}
	}
	return id
}

// waitListed reports whether some pod of vc lists node id in its CLUSTER NODES within d.
func waitListed(t *testing.T, vc *v1.ValkeyCluster, id string, d time.Duration) bool {
	t.Helper()
	var clients []valkeygo.Client
	for _, p := range harness.Pods(t, vc) {
		clients = append(clients, nodeClient(t, p))
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for _, c := range clients {
			nodes, err := c.Do(context.Background(), c.B().ClusterNodes().Build()).ToString()
			if err == nil && strings.Contains(nodes, id) {
				return true
			}
		}
	}
	return false
}

// nodeClient is a client of one node through its open default user, closed with the test.
func nodeClient(t *testing.T, p corev1.Pod) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(p)}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
