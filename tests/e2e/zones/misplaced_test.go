package zones

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// TestMisplacedPrimaryKeepsEveryCopy replays, deterministically, how the chaos run of seed 4242
// lost every copy of a shard (../shared/evidence/chaos-seed-4242). There, Valkey's replica
// migration moved a replica of shard 1 to shard 0's primary (left without a working replica
// while its own was cut off), Valkey then promoted it when that primary's Kubernetes node
// stopped, and the operator retired shard 0's last node as the leftover of a "drained" shard:
// the node of shard 1 serving shard 0's slots was their only copy, and the next fault took it.
//
// Here, on a 2×1 under a writer (WAIT 1), with the operator stopped: CLUSTER REPLICATE moves
// shard 1's replica to shard 0's primary (as Valkey's replica migration does, deterministically)
// and CLUSTER FAILOVER promotes it, so a node labelled shard 1 serves
// shard 0's slots with shard 0's two nodes as its replicas. A new operator must give shard 0 its
// slots back (a graceful failover to one of its nodes) and then retire the node of shard 1 that
// shard 0 no longer needs; it never retires a node of shard 0 (the earlier operator retired
// both, one pass after the other, leaving one copy). Then shard 0's primary is killed: every
// write acknowledged by WAIT 1, and every seeded key, reads back.
func TestMisplacedPrimaryKeepsEveryCopy(t *testing.T) {
	const ns = "misplaced"
	vc := harness.ActiveCluster(t, ns, 2, 1)
	harness.WaitReady(t, vc, 2, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, 20_000, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)

	creds := harness.Creds(t, vc)
	byRole := map[string]corev1.Pod{} // "<shard>/primary", "<shard>/replica"
	ids := map[string]string{}        // pod -> node id
	for _, p := range harness.Pods(t, vc) {
		v := valkey.Observe(context.Background(), []string{harness.PodAddr(p)}, creds)[0]
		me, ok := v.Myself()
		if !ok {
			t.Fatalf("%s: %v", p.Name, v.Err)
		}
		role := "replica"
		if me.Role == valkey.RolePrimary {
			role = "primary"
		}
		byRole[p.Labels[v1.LabelShard]+"/"+role], ids[p.Name] = p, me.ID
	}
	a0, b0, b1 := byRole["0/primary"], byRole["0/replica"], byRole["1/replica"]
	if a0.Name == "" || b0.Name == "" || b1.Name == "" {
		t.Fatalf("pods by shard and role: %v", byRole)
	}

	if err := syscall.Kill(harness.Op.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(harness.Op.Pid(), syscall.SIGCONT)
		}
	}()
	do := func(p corev1.Pod, what string, f func(*valkey.Client) error) {
		t.Helper()
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err == nil {
			err = f(c)
			c.Close()
		}
		if err != nil {
			t.Fatalf("%s on %s: %v", what, p.Name, err)
		}
	}
	do(b1, "CLUSTER REPLICATE", func(c *valkey.Client) error { return c.Replicate(context.Background(), ids[a0.Name]) })
	waitFollows(t, b1, ids[a0.Name], creds)
	harness.WaitLinkUp(t, harness.PodAddr(b1), creds)
	do(b1, "CLUSTER FAILOVER", func(c *valkey.Client) error { return c.Failover(context.Background(), valkey.FailoverCoordinated) })
	waitFollows(t, a0, ids[b1.Name], creds)
	waitFollows(t, b0, ids[b1.Name], creds)
	t.Logf("%s (shard 1) serves shard 0's slots; %s and %s (shard 0) replicate it", b1.Name, a0.Name, b0.Name)

	retiredBefore := len(retiredIn(t, ns))
	harness.RestartOperator(t)
	stopped = false
	harness.WaitReady(t, vc, 2, 1, nil, harness.RollTimeout)
	harness.CheckShardsAgree(t, vc)

	realigned := harness.CountLines(t, logging.MsgRealigningShard, ns, "")
	retired := retiredIn(t, ns)[retiredBefore:]
	t.Logf("%d realigning failovers; retired %v", realigned, retired)
	if realigned != 1 {
		t.Errorf("%d %q lines, want 1", realigned, logging.MsgRealigningShard)
	}
	for _, r := range retired {
		if r.pod == a0.Name || r.pod == b0.Name {
			t.Errorf("retired %s of shard 0 (%s): a copy of shard 0's data", r.pod, r.reason)
		}
	}
	if len(retired) != 1 || retired[0].pod != b1.Name || retired[0].reason != plan.RetireMisplaced {
		t.Errorf("retired %v, want only %s (%s)", retired, b1.Name, plan.RetireMisplaced)
	}

	// The fault the chaos run struck next: shard 0's primary dies. Its replica holds every write
	// WAIT 1 confirmed.
	victim := podWithShardRole(t, vc, 0, v1.NodeRolePrimary)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 2, 1, map[string]bool{victim: true}, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	harness.FinishWriter(t, w, vc, opts) // fails on a replicated write lost; counts the unreplicated apart
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	if n := harness.CountLines(t, logging.MsgShardDataLost, ns, ""); n > 0 {
		t.Errorf("%d %q lines", n, logging.MsgShardDataLost)
	}
}

// waitFollows waits until the node in p replicates primaryID, by its own CLUSTER NODES.
func waitFollows(t *testing.T, p corev1.Pod, primaryID string, creds valkey.Credentials) {
	t.Helper()
	harness.WaitFor(t, fmt.Sprintf("%s replicating %.8s", p.Name, primaryID), time.Minute, func() string {
		v := valkey.Observe(context.Background(), []string{harness.PodAddr(p)}, creds)[0]
		me, ok := v.Myself()
		if ok && me.Role == valkey.RoleReplica && me.PrimaryID == primaryID {
			return ""
		}
		return fmt.Sprintf("role %s of %.8s", me.Role, me.PrimaryID)
	})
}

type retirement struct{ pod, reason string }

// retiredIn lists the namespace's `retiring node` lines in order.
func retiredIn(t *testing.T, ns string) []retirement {
	t.Helper()
	var out []retirement
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgRetiringNode && strings.HasSuffix(l.Ref(), "."+ns) {
			pod, _ := l.Fields[logging.FieldPod].(string)
			reason, _ := l.Fields[logging.FieldReason].(string)
			out = append(out, retirement{pod, reason})
		}
	}
	return out
}

// podWithShardRole is the running pod of shard with role in status.nodeDetails.
func podWithShardRole(t *testing.T, vc *v1.ValkeyCluster, shard int32, role v1.NodeRole) string {
	t.Helper()
	for _, n := range harness.CurrentCluster(t, vc).Status.NodeDetails {
		if n.Shard == shard && n.Role == role {
			return n.Pod
		}
	}
	t.Fatalf("no %s of shard %d in status.nodeDetails", role, shard)
	return ""
}
