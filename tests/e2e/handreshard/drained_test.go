package handreshard

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// TestDrainedShardWantedAgain: a shard whose primary gave away its last slot while the operator
// was away (as a scale-in to fewer shards does just before its nodes are retired) is still
// wanted by spec.shards. The operator stopped (SIGSTOP) while shard 2 of a 3×1 on 9.1.2 is drained
// into shard 1 by hand, with one CLUSTER MIGRATESLOTS (Valkey 9's atomic slot migration, what the
// operator's own scale-in uses on 9), then replaced by a new one, with the writer on throughout.
// Found by a break test: a 4 → 2 → 4 with the revert after the drain sat at "waiting for the
// cluster to agree" for good. (valkey-cli --cluster reshard drained the 5 461 slots one by one in
// 2 min 46 s on an idle machine and 7 min under make test, most of this package's time.)
//
//   - With replica migration on (Valkey's default, which the operator keeps), Valkey turns the
//     drained primary and its replica into replicas of the primary that took the slots: the
//     operator retires them (`retiring node`, RetireMisplaced: that primary keeps its own
//     replica), creates the shard afresh and moves its share back.
//   - With a ValkeyConfig that sets cluster-allow-replica-migration no, the drained primary stays
//     a primary with no slot, its replica with it: the operator moves the shard's share back into
//     it, and retires nothing.
func TestDrainedShardWantedAgain(t *testing.T) {
	t.Run("replica migration on", func(t *testing.T) { drainedShardWantedAgain(t, "reshard-drained", true) })
	t.Run("replica migration off", func(t *testing.T) { drainedShardWantedAgain(t, "reshard-drained-nomig", false) })
}

func drainedShardWantedAgain(t *testing.T, ns string, migration bool) {
	harness.SetupNamespace(t, ns)
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	if !migration {
		cfg.Spec.Valkey["cluster-allow-replica-migration"] = "no"
	}
	harness.Create(t, img, cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, 20_000, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)

	// The primaries of shards 1 and 2, by Valkey's view.
	creds := harness.Creds(t, vc)
	primaries := map[string][2]string{} // shard -> {addr, node id}
	var drained valkey.SlotRanges       // shard 2's slots
	for _, p := range harness.Pods(t, vc) {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := c.ClusterNodes(context.Background())
		c.Close()
		if me, ok := valkey.Myself(entries); err == nil && ok && me.Role == valkey.RolePrimary {
			primaries[p.Labels[v1.LabelShard]] = [2]string{harness.PodAddr(p), me.ID}
			if p.Labels[v1.LabelShard] == "2" {
				drained = me.Slots
			}
		}
	}
	src, dst := primaries["2"], primaries["1"]
	if src[1] == "" || dst[1] == "" {
		t.Fatalf("primaries by shard: %v", primaries)
	}

	// Operator.Kill waits for the process to exit; a stopped one does not.
	if err := syscall.Kill(harness.Op.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(harness.Op.Pid(), syscall.SIGCONT) }
	if err := drain(src[0], dst[0], creds, drained, dst[1]); err != nil {
		cont()
		t.Fatalf("draining shard 2 into shard 1: %v", err)
	}
	// With replica migration on, Valkey turns the drained primary into a replica of the node that
	// took its last slot; with it off, the drained primary stays a primary serving no slot.
	problem := harness.Poll(t.Context(), 30*time.Second, func() string {
		c, err := valkey.NewClient(src[0], creds)
		if err != nil {
			return err.Error()
		}
		entries, err := c.ClusterNodes(context.Background())
		c.Close()
		me, ok := valkey.Myself(entries)
		turned := ok && me.Role == valkey.RoleReplica && me.PrimaryID == dst[1]
		stayed := ok && me.Role == valkey.RolePrimary && len(me.Slots) == 0
		if err == nil && ((migration && turned) || (!migration && stayed)) {
			return ""
		}
		return fmt.Sprintf("role %s, primary %s, %d slots, error %v", me.Role, me.PrimaryID, len(me.Slots), err)
	})
	if problem != "" {
		cont()
		t.Fatalf("the drained primary of shard 2 did not turn replica (migration %v) within 30 s: %s", migration, problem)
	}
	before := harness.CountLines(t, logging.MsgRetiringNode, ns, "")
	harness.RestartOperator(t)

	// The status still says what the stopped operator last saw (Ready): wait for Valkey to
	// serve the drained shard again, then for the status.
	waitServingPrimaries(t, vc, 3, harness.RollTimeout)
	harness.WaitScaled(t, vc, 3, 1, harness.RollTimeout)
	harness.CheckEvenSpread(t, vc, 3)
	harness.CheckShardsAgree(t, vc)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost", r.LostUnreplicated)
	}
	misplacedRetired := 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgRetiringNode && strings.HasSuffix(l.Ref(), "."+ns) && l.Fields[logging.FieldReason] == plan.RetireMisplaced {
			misplacedRetired++
		}
	}
	retired := harness.CountLines(t, logging.MsgRetiringNode, ns, "") - before
	switch {
	case migration && (misplacedRetired != 2 || retired < 2):
		t.Errorf("%d nodes retired as %q, want shard 2's two", misplacedRetired, plan.RetireMisplaced)
	case !migration && retired != 0:
		t.Errorf("%d nodes retired, want none: the drained primary takes its share back", retired)
	}
}

// drain moves ranges from the primary at addr to the primary targetID (at targetAddr) with one
// CLUSTER MIGRATESLOTS and waits, at most two minutes, for Valkey to report the export ended.
// The source streams the slots to the target as its masteruser, the replication user, which
// the operator widens for slot import only while a reshard it runs is pending: the hand drain
// widens it on the target first, as a person would, through the open default user (acl.ReplicationRule; the restarted operator
// puts the node's users back as it renders them).
func drain(addr, targetAddr string, creds valkey.Credentials, ranges valkey.SlotRanges, targetID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The cluster binds no user, so its default user is open; the operator's own user may not
	// change users (it only loads the ACL file).
	t, err := valkey.NewClient(targetAddr, valkey.Credentials{})
	if err != nil {
		return err
	}
	err = t.ACLSetUser(ctx, acl.ReplicationUser, acl.ReplicationRule(true))
	t.Close()
	if err != nil {
		return err
	}
	c, err := valkey.NewClient(addr, creds)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.MigrateSlots(ctx, ranges, targetID); err != nil {
		return err
	}
	want := valkey.FormatRanges(ranges)
	for {
		jobs, err := c.SlotMigrations(ctx)
		if err != nil {
			return err
		}
		for _, j := range jobs { // newest first
			if j.Operation == "EXPORT" && j.SlotRanges == want && j.Terminal() {
				if j.State != "success" {
					return fmt.Errorf("cluster migrateslots %s: %s: %s", want, j.State, j.Message)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster migrateslots %s: not ended: %w", want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitServingPrimaries waits until, by the first pod's CLUSTER NODES, n primaries serve slots.
func waitServingPrimaries(t *testing.T, vc *v1.ValkeyCluster, n int, timeout time.Duration) {
	t.Helper()
	harness.WaitFor(t, fmt.Sprintf("%d primaries serving slots", n), timeout, func() string {
		serving := 0
		for _, p := range harness.Pods(t, vc) {
			if me, ok := valkey.Observe(context.Background(), []string{harness.PodAddr(p)}, harness.Creds(t, vc))[0].Myself(); ok && me.Role == valkey.RolePrimary && me.Slots.Count() > 0 {
				serving++
			}
		}
		if serving == n {
			return ""
		}
		return fmt.Sprintf("%d serve slots", serving)
	})
}
