package reshardfault

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// versions are the Valkey versions the fault tests run on: 8.0.1 moves slots with the classic
// protocol, 9.1.2 with atomic CLUSTER MIGRATESLOTS.
var versions = []struct{ name, version string }{{"8", "8.0.1"}, {"9", localcluster.Valkey9Version}}

// checkMethodAfterKills is checkMethod for a reshard whose operators were killed mid-move. An
// atomic job runs inside Valkey and is logged when it ends: one that ended while the operator
// that started it was dead, before the next one took the lease, leaves no line, and Valkey's own
// record of the jobs is the evidence then.
func checkMethodAfterKills(t *testing.T, vc *v1.ValkeyCluster, version string) {
	t.Helper()
	if version == localcluster.Valkey9Version && harness.CountLines(t, logging.MsgMovingSlots, vc.Namespace, "") == 0 {
		if jobs := succeededMigrations(t, vc); jobs > 0 {
			t.Logf("no %q line, but the nodes list %d atomic migrations that succeeded (ended while no operator ran)", logging.MsgMovingSlots, jobs)
			return
		}
	}
	harness.CheckMethod(t, vc.Namespace, version)
}

// succeededMigrations counts the atomic slot migrations (CLUSTER GETSLOTMIGRATIONS) that vc's
// running nodes list as succeeded.
func succeededMigrations(t *testing.T, vc *v1.ValkeyCluster) int {
	t.Helper()
	n := 0
	for _, j := range slotMigrationJobs(t, vc, harness.Creds(t, vc)) {
		if j.State == "success" {
			n++
		}
	}
	return n
}

// slotMigrationJobs lists the atomic slot migrations (CLUSTER GETSLOTMIGRATIONS) of every running
// node of vc that answers.
func slotMigrationJobs(t *testing.T, vc *v1.ValkeyCluster, creds valkey.Credentials) []valkey.SlotMigration9 {
	t.Helper()
	var out []valkey.SlotMigration9
	for _, p := range harness.Pods(t, vc) {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			continue
		}
		jobs, err := c.SlotMigrations(context.Background())
		c.Close()
		if err == nil {
			out = append(out, jobs...)
		}
	}
	return out
}

// TestOperatorKilledMidMove: the operator is SIGKILLed twice while 3 → 4 shards moves slots under
// writes; the next operator settles what was left open and finishes: every slot served once,
// spread even, every seeded and acknowledged key read back.
func TestOperatorKilledMidMove(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) { operatorKilledMidMove(t, "reshard-kill-"+v.name, v.version) })
	}
}

func operatorKilledMidMove(t *testing.T, ns, version string) {
	vc := harness.VersionedCluster(t, ns, version, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, harness.FaultKeys, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)
	before := harness.CountLines(t, logging.MsgMovingSlots, ns, "")
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	for round := range 2 {
		if version == localcluster.Valkey9Version {
			// 3 -> 4 is one batch of atomic jobs, logged when it ends: kill while a job runs.
			// The second kill finds one only if the first left work behind.
			if !waitMigrationJob(t, vc, []time.Duration{3 * time.Minute, 20 * time.Second}[round]) {
				t.Logf("round %d: no migration job left to interrupt", round)
				break
			}
			harness.RestartOperator(t)
			continue
		}
		// Every 100 ms: the restart must land while the move is in flight.
		deadline := time.Now().Add(3 * time.Minute)
		for harness.CountLines(t, logging.MsgMovingSlots, ns, "") == before {
			if time.Now().After(deadline) {
				t.Fatal("no slot moved within 3 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		harness.RestartOperator(t)
		before = harness.CountLines(t, logging.MsgMovingSlots, ns, "")
	}
	harness.WaitScaled(t, vc, 4, 1, harness.RollTimeout)
	harness.CheckEvenSpread(t, vc, 4)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost", r.LostUnreplicated)
	}
	harness.ReportMoveRefusals(t, r)
	checkMethodAfterKills(t, vc, version)
}

// TestReshardDestinationKilled: 3 → 4 shards under the writer, and the process of the new shard's
// primary, the destination of every move, is SIGKILLed while it imports a slot. It converges:
// Active and Ready with four shards, every slot served once, spread even, every seeded key read
// back. Losses Valkey allows in a crash failover are the writes the dead primary acknowledged
// alone (replication is asynchronous: the writer's WAIT 1 timed out, or did not run because the
// write was redirected with ASK); they are counted and logged apart (LostUnreplicated). A write a
// replica acknowledged (LostReplicated) must survive, and every slot must take writes again.
func TestReshardDestinationKilled(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) { reshardPrimaryKilled(t, "reshard-kill-dst-"+v.name, v.version, 3) })
	}
}

// TestReshardSourceKilled: the same, killing the primary of shard 0, one of the three sources
// that give slots to the new shard.
func TestReshardSourceKilled(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) { reshardPrimaryKilled(t, "reshard-kill-src-"+v.name, v.version, 0) })
	}
}

func reshardPrimaryKilled(t *testing.T, ns, version string, shard int) {
	vc := harness.VersionedCluster(t, ns, version, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, harness.FaultKeys, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)
	before := harness.CountLines(t, logging.MsgMovingSlots, ns, "")
	start := time.Now()
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	if version == localcluster.Valkey9Version {
		// 3 -> 4 is one batch of atomic jobs, logged when it ends: wait for the first job
		// instead, so the kill lands while slots move.
		if !waitMigrationJob(t, vc, 3*time.Minute) {
			t.Fatal("no atomic migration job within 3 minutes")
		}
	} else {
		harness.WaitLine(t, logging.MsgMovingSlots, ns, before, 3*time.Minute)
	}
	victim, open := waitShardPrimaryOpen(t, vc, shard, 10*time.Second)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, shard %d's primary, %s after the edit, %s", victim, shard, time.Since(start).Round(100*time.Millisecond), open)
	harness.WaitScaled(t, vc, 4, 1, harness.RollTimeout)
	t.Logf("4 shards, Active and Ready, %s after the edit", time.Since(start).Round(100*time.Millisecond))
	harness.CheckEvenSpread(t, vc, 4)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	// finishWriter fails on a lost replicated key or a key that cannot be read, and logs the
	// unreplicated losses. Refusals are logged, not asserted: the dead primary's slots refuse
	// writes until its replica is promoted, a latency the benchmarks measure.
	r := harness.FinishWriter(t, w, vc, opts)
	longest, slot := r.LongestRefusal()
	t.Logf("lost: %d replicated, %d unreplicated (allowed: a crash failover); longest refusal %s (slot %d)",
		r.LostReplicated, r.LostUnreplicated, longest.Round(time.Millisecond), slot)
}

// TestScaleInReverted: a 4×1 cluster whose spec.acl binds a user, so that the default user is
// off, goes 4 → 2 shards under the writer (authenticated as that user), and is raised to 3 while
// the drain still moves slots. It converges to 3 shards: Active and Ready, spread even, every
// seeded and acknowledged key read back. No node fails, so no loss is allowed.
func TestScaleInReverted(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) { scaleInReverted(t, "reshard-revert-"+v.name, v.version) })
	}
}

func scaleInReverted(t *testing.T, ns, version string) {
	harness.SetupNamespace(t, ns)
	rw := harness.Role(ns+"-rw", []string{"read", "write"}, v1.CommandRule{Name: "wait", Access: v1.RuleAllow})
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = version, version
	harness.Create(t, img, harness.NewConfig(ns+"-config", ns+"-image"), rw)
	app := harness.DataUser{Name: "app", Password: "app-password"}
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(4), harness.WithReplicas(1))
	vc.Spec.ACL = []v1.ACLBinding{harness.Bind(app.Name, []string{app.Password}, harness.Permit(rw.Name, "*", v1.KeyAccessReadWrite))}
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 4, 1, nil, harness.FormTimeout)
	if _, err := harness.NodeDo(harness.Pods(t, vc)[0], "", "", "PING"); !harness.Noauth("", err) {
		t.Fatalf("the default user answers PING (%v): it should be off while a user is bound", err)
	}
	seeded := harness.SeedKeys(t, vc, harness.FaultKeys, app)
	opts := harness.ClusterWriterOptions(t, vc, ns+":")
	opts.Username, opts.Password = app.Name, app.Password
	w, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	before := harness.CountLines(t, logging.MsgMovingSlots, ns, "")
	start := time.Now()
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 2 })
	harness.WaitLine(t, logging.MsgMovingSlots, ns, before, 3*time.Minute)
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 3 })
	t.Logf("shards raised to 3 %s after lowering them to 2", time.Since(start).Round(100*time.Millisecond))
	harness.WaitScaled(t, vc, 3, 1, harness.RollTimeout)
	t.Logf("3 shards, Active and Ready, %s after the first edit", time.Since(start).Round(100*time.Millisecond))
	harness.CheckEvenSpread(t, vc, 3)
	harness.CheckSeeded(t, vc, seeded, app)
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: slot moves lose none", r.LostUnreplicated)
	}
	harness.ReportMoveRefusals(t, r)
	harness.CheckMethod(t, ns, version)
}

// waitMigrationJob waits until some node lists an atomic migration job that has not ended, and
// reports whether one did within timeout.
func waitMigrationJob(t *testing.T, vc *v1.ValkeyCluster, timeout time.Duration) bool {
	t.Helper()
	creds := harness.Creds(t, vc)
	// Every 20 ms: an atomic migration job lasts a fraction of a second.
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, j := range slotMigrationJobs(t, vc, creds) {
			if !j.Terminal() {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// waitShardPrimaryOpen finds the primary of shard (by Valkey's own view) and waits, up to
// timeout, until it reports a slot open (migrating or importing): the middle of a move. It
// returns the pod and what it saw, for the log; the caller acts at once either way.
func waitShardPrimaryOpen(t *testing.T, vc *v1.ValkeyCluster, shard int, timeout time.Duration) (pod, seen string) {
	t.Helper()
	creds := harness.Creds(t, vc)
	var c *valkey.Client
	for _, p := range harness.Pods(t, vc) {
		if p.Labels[v1.LabelShard] != strconv.Itoa(shard) {
			continue
		}
		cl, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := cl.ClusterNodes(context.Background())
		if me, ok := valkey.Myself(entries); err == nil && ok && me.Role == valkey.RolePrimary {
			pod, c = p.Name, cl
			break
		}
		cl.Close()
	}
	if c == nil {
		t.Fatalf("shard %d has no primary", shard)
	}
	defer c.Close()
	// Every 10 ms: the kill must land while a slot is open.
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		entries, err := c.ClusterNodes(context.Background())
		if me, ok := valkey.Myself(entries); err == nil && ok && len(me.Migrating)+len(me.Importing) > 0 {
			return pod, fmt.Sprintf("while it had %d slots migrating and %d importing (serving %d)", len(me.Migrating), len(me.Importing), me.Slots.Count())
		}
		// An atomic migration (Valkey 9) opens no slot: its job is in CLUSTER GETSLOTMIGRATIONS.
		if jobs, err := c.SlotMigrations(context.Background()); err == nil {
			for _, j := range jobs {
				if !j.Terminal() {
					return pod, fmt.Sprintf("while it ran an atomic %s of %s (%s)", j.Operation, j.SlotRanges, j.State)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pod, fmt.Sprintf("between batches: no open slot seen within %s", timeout)
}
