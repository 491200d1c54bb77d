package harness

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// ShardPod is the running pod of vc's shard that Valkey says serves the shard's slots now
// (primary), or its pick-th replica by name: what a fault aimed at "shard 0's primary" hits.
func ShardPod(ctx context.Context, vc *v1.ValkeyCluster, creds func([]corev1.Pod) valkey.Credentials, shard int, primary bool, pick int) (corev1.Pod, error) {
	pods, err := ClusterPods(ctx, K8s, vc)
	if err != nil {
		return corev1.Pod{}, err
	}
	var mine []corev1.Pod
	for _, p := range pods {
		if p.Labels[v1.LabelShard] == strconv.Itoa(shard) {
			mine = append(mine, p)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Name < mine[j].Name })
	if p, ok := pickByRole(ctx, mine, creds(pods), primary, pick); ok {
		return p, nil
	}
	return corev1.Pod{}, fmt.Errorf("%s/%s shard %d has no reachable %s", vc.Namespace, vc.Name, shard, roleWord(primary))
}

// pickByRole is, of a shard's pods, the pick-th (modulo) that Valkey says is a primary serving
// slots (primary) or a replica, in the order of pods; false when none reachable is.
func pickByRole(ctx context.Context, pods []corev1.Pod, creds valkey.Credentials, primary bool, pick int) (corev1.Pod, bool) {
	addrs := make([]string, len(pods))
	for i, p := range pods {
		addrs[i] = PodAddr(p)
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	views := valkey.Observe(octx, addrs, creds)
	cancel()
	var candidates []corev1.Pod
	for i, v := range views {
		me, _ := v.Myself()
		switch {
		case !v.Reachable:
		case primary && me.Role == valkey.RolePrimary && len(me.Slots) > 0:
			candidates = append(candidates, pods[i])
		case !primary && me.Role == valkey.RoleReplica:
			candidates = append(candidates, pods[i])
		}
	}
	if len(candidates) == 0 {
		return corev1.Pod{}, false
	}
	return candidates[pick%len(candidates)], true
}

func roleWord(primary bool) string {
	if primary {
		return "primary"
	}
	return "replica"
}

// nodeRole asks c's node whether it is a primary and, if a replica, which primary it follows.
func nodeRole(ctx context.Context, c *valkey.Client) (primary bool, follows string, err error) {
	entries, err := c.ClusterNodes(ctx)
	if err != nil {
		return false, "", err
	}
	me, ok := valkey.Myself(entries)
	if !ok {
		return false, "", fmt.Errorf("%s: no myself line", c.Addr())
	}
	return me.Role == valkey.RolePrimary, me.PrimaryID, nil
}

// Handover sends a graceful CLUSTER FAILOVER to replica (as the operator's spread and roll do)
// and returns as soon as it says it is a primary and the old primary, old, says it follows it
// (asking both every 10 ms): the moment after which the other primaries may still see old as a
// primary, until its next heartbeat reaches them.
func Handover(ctx context.Context, replica, old corev1.Pod, creds valkey.Credentials) error {
	c, err := valkey.NewClient(PodAddr(replica), creds)
	if err != nil {
		return err
	}
	defer c.Close()
	o, err := valkey.NewClient(PodAddr(old), creds)
	if err != nil {
		return err
	}
	defer o.Close()
	id, err := c.MyID(ctx)
	if err != nil {
		return err
	}
	if err := c.Failover(ctx, valkey.FailoverCoordinated); err != nil {
		return err
	}
	// A manual failover Valkey could not finish within its own 5 s (the primary busy, the
	// replica a moment behind) is dropped in silence: it is asked again every 6 s, for 40 s (in
	// make test at load 38, a replica that had joined a second before was asked four times in
	// 20 s without taking over).
	deadline, again := time.Now().Add(40*time.Second), time.Now().Add(6*time.Second)
	for {
		if time.Now().After(again) {
			again = time.Now().Add(6 * time.Second)
			if err := c.Failover(ctx, valkey.FailoverCoordinated); err != nil && !strings.Contains(err.Error(), "send CLUSTER FAILOVER to a replica") {
				return err
			}
		}
		isPrimary, _, err := nodeRole(ctx, c)
		if err == nil && isPrimary {
			wasPrimary, follows, err := nodeRole(ctx, o)
			if err == nil && !wasPrimary && follows == id {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("handover to %s not seen within 40 s", replica.Name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NodeRole asks the node of p (with creds) whether it is a primary and, if a replica, which
// primary it follows.
func NodeRole(ctx context.Context, p corev1.Pod, creds valkey.Credentials) (primary bool, follows string, err error) {
	c, err := valkey.NewClient(PodAddr(p), creds)
	if err != nil {
		return false, "", err
	}
	defer c.Close()
	return nodeRole(ctx, c)
}

// WaitPrimariesSpread waits until vc's primaries run on distinct Kubernetes nodes, as many as
// there are nodes (the spread planner's aim with the local cluster's three zones, one node
// each), so that no spread failover of the operator lands in the middle of a measurement.
func WaitPrimariesSpread(t testing.TB, vc *v1.ValkeyCluster) {
	t.Helper()
	creds := func([]corev1.Pod) valkey.Credentials { return Creds(t, vc) }
	WaitFor(t, "primaries on distinct nodes", 3*time.Minute, func() string {
		nodes := map[string]bool{}
		for s := range int(vc.Spec.Shards) {
			p, err := ShardPod(t.Context(), vc, creds, s, true, 0)
			if err != nil {
				return err.Error()
			}
			if nodes[p.Spec.NodeName] && len(nodes) < 3 {
				return "two primaries on " + p.Spec.NodeName
			}
			nodes[p.Spec.NodeName] = true
		}
		return ""
	})
}
