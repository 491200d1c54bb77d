package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// reshardKeys is how many keys are seeded before resharding (the issue asks for 200 k).
const reshardKeys = 200_000

// TestReshardValkey8: a 3×1 cluster on Valkey 8.0.1 with 200 k keys and the 16-slot writer goes
// 3 → 4 → 2 → 3 shards. After each step: Active and Ready, Valkey serves every slot once, every
// primary within one slot of 16384/N, and every seeded key reads back; at the end every
// acknowledged write reads back. Slot moves lose no acknowledged write (MIGRATE is atomic per
// key, clients follow ASK/MOVED), so no loss is allowed.
func TestReshardValkey8(t *testing.T) { reshardScenario(t, "reshard-8", "8.0.1") }

// TestReshardValkey9: the same on Valkey 9.1.2 (classic protocol: 9.x keeps it).
func TestReshardValkey9(t *testing.T) { reshardScenario(t, "reshard-9", localcluster.Valkey9Version) }

func reshardScenario(t *testing.T, ns, version string) {
	setupNamespace(t, ns)
	img := newImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = version, version
	create(t, img, newConfig(ns+"-config", ns+"-image"))
	vc := newCluster(ns, "vc", ns+"-config", withShards(3), withReplicas(1))
	create(t, vc)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	seeded := seedKeys(t, vc, reshardKeys)
	w, opts := startWriter(t, vc)
	for _, n := range []int{4, 2, 3} {
		start := time.Now()
		editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = int32(n) })
		waitScaled(t, vc, n, 1, rollTimeout)
		t.Logf("%s: %d shards in %s", version, n, time.Since(start).Round(100*time.Millisecond))
		checkEvenSpread(t, vc, n)
		checkSeeded(t, vc, seeded)
	}
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: slot moves lose none", r.LostUnreplicated)
	}
	reportRefusals(t, r)
	if n := countLines(t, logging.MsgMovingSlots, ns, ""); n == 0 {
		t.Errorf("no %q line", logging.MsgMovingSlots)
	}
}

// seedKeys writes n keys of 100 bytes through a cluster client, pipelined, and returns the
// number written (key i is seed:<i>, its value derived from i).
func seedKeys(t *testing.T, vc *v1.ValkeyCluster, n int) int {
	t.Helper()
	c := clusterClient(t, vc)
	defer c.Close()
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		cmds := make(valkeygo.Commands, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			cmds = append(cmds, c.B().Set().Key(seedKey(j)).Value(seedValue(j)).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	t.Logf("seeded %d keys in %s", n, time.Since(start).Round(time.Millisecond))
	return n
}

func seedKey(i int) string   { return fmt.Sprintf("seed:%d", i) }
func seedValue(i int) string { return fmt.Sprintf("%0100d", i) }

// checkSeeded reads back every seeded key.
func checkSeeded(t *testing.T, vc *v1.ValkeyCluster, n int) {
	t.Helper()
	c := clusterClient(t, vc)
	defer c.Close()
	ctx := context.Background()
	bad := 0
	for i := 0; i < n; i += 1000 {
		cmds := make(valkeygo.Commands, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			cmds = append(cmds, c.B().Get().Key(seedKey(j)).Build())
		}
		for k, r := range c.DoMulti(ctx, cmds...) {
			if v, err := r.ToString(); err != nil || v != seedValue(i+k) {
				if bad < 5 {
					t.Errorf("GET %s: %v", seedKey(i+k), err)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d seeded keys did not read back", bad, n)
	}
}

func clusterClient(t *testing.T, vc *v1.ValkeyCluster) valkeygo.Client {
	t.Helper()
	var addrs []string
	for _, p := range clusterPods(t, vc) {
		addrs = append(addrs, addr(p))
	}
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkEvenSpread: Valkey's own view (CLUSTER NODES of a running pod) gives every one of n
// primaries within one slot of 16384/n.
func checkEvenSpread(t *testing.T, vc *v1.ValkeyCluster, n int) {
	t.Helper()
	pods := clusterPods(t, vc)
	c, err := valkey.NewClient(addr(pods[0]), operatorCreds(t, vc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	entries, err := c.ClusterNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, e := range entries {
		if e.Role == valkey.RolePrimary && e.Slots.Count() > 0 {
			counts = append(counts, e.Slots.Count())
		}
	}
	if len(counts) != n {
		t.Fatalf("%d primaries serve slots, want %d: %v", len(counts), n, counts)
	}
	for _, k := range counts {
		if k < valkey.SlotCount/n-1 || k > valkey.SlotCount/n+1 {
			t.Errorf("a primary serves %d slots, want %d±1 (all: %v)", k, valkey.SlotCount/n, counts)
		}
	}
}

// TestOpenSlotIsSettled: a slot left MIGRATING by hand on an Active cluster (as an interrupted
// move leaves it) is settled by the operator: no node reports an open slot any more, every slot
// is served once, and the slot's keys read back.
func TestOpenSlotIsSettled(t *testing.T) {
	ns := "open-slot"
	vc := activeCluster(t, ns, 2, 1)
	waitReady(t, vc, 2, 1, nil, formTimeout)
	seeded := seedKeys(t, vc, 2000)
	creds := operatorCreds(t, vc)
	var src, dst *valkey.Client
	var srcID, dstID string
	for _, p := range clusterPods(t, vc) {
		c, err := valkey.NewClient(addr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		entries, err := c.ClusterNodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		me, _ := valkey.Myself(entries)
		if me.Role != valkey.RolePrimary {
			continue
		}
		if src == nil {
			src, srcID = c, me.ID
		} else {
			dst, dstID = c, me.ID
		}
	}
	// The source's last slot: open it toward the other primary, on both sides, as step one of
	// a classic move would.
	entries, _ := src.ClusterNodes(context.Background())
	me, _ := valkey.Myself(entries)
	open := me.Slots[len(me.Slots)-1].End
	if err := dst.SetSlotImporting(context.Background(), open, srcID); err != nil {
		t.Fatal(err)
	}
	if err := src.SetSlotMigrating(context.Background(), open, dstID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		still := false
		for _, c := range []*valkey.Client{src, dst} {
			entries, err := c.ClusterNodes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			me, _ := valkey.Myself(entries)
			still = still || len(me.Migrating) > 0 || len(me.Importing) > 0
		}
		if !still {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %d still open after 2 minutes", open)
		}
		time.Sleep(250 * time.Millisecond)
	}
	waitReady(t, vc, 2, 1, nil, time.Minute)
	checkSeeded(t, vc, seeded)
	if countLines(t, logging.MsgMovingSlots, ns, "") == 0 && countLines(t, logging.MsgClosingSlot, ns, "") == 0 {
		t.Errorf("the slot was settled without a %q or %q line", logging.MsgMovingSlots, logging.MsgClosingSlot)
	}
}

// TestOperatorKilledMidMove: the operator is SIGKILLed twice while 3 → 4 shards moves slots under
// writes; the next operator settles what was left open and finishes: every slot served once,
// spread even, every seeded and acknowledged key read back.
func TestOperatorKilledMidMove(t *testing.T) {
	ns := "reshard-kill"
	vc := activeCluster(t, ns, 3, 1)
	waitReady(t, vc, 3, 1, nil, formTimeout)
	seeded := seedKeys(t, vc, 50_000)
	w, opts := startWriter(t, vc)
	before := countLines(t, logging.MsgMovingSlots, ns, "")
	editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	for range 2 {
		deadline := time.Now().Add(3 * time.Minute)
		for countLines(t, logging.MsgMovingSlots, ns, "") == before {
			if time.Now().After(deadline) {
				t.Fatal("no slot moved within 3 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		restartOperator(t)
		before = countLines(t, logging.MsgMovingSlots, ns, "")
	}
	waitScaled(t, vc, 4, 1, rollTimeout)
	checkEvenSpread(t, vc, 4)
	checkSeeded(t, vc, seeded)
	r := finishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost", r.LostUnreplicated)
	}
	reportRefusals(t, r)
}
