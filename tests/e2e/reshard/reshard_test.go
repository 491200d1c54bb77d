package reshard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
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
func TestReshardValkey8(t *testing.T) {
	reshardScenario(t, "reshard-8", "8.0.1")
}

// TestReshardValkey9: the same on Valkey 9.1.2, where every pair moves its slots with atomic
// CLUSTER MIGRATESLOTS (the replication user widened for it while the reshard is pending, and
// narrowed again after).
func TestReshardValkey9(t *testing.T) {
	reshardScenario(t, "reshard-9", localcluster.Valkey9Version)
}

func reshardScenario(t *testing.T, ns, version string) {
	harness.SetupNamespace(t, ns)
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = version, version
	harness.Create(t, img, harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, reshardKeys, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)
	for _, n := range []int{4, 2, 3} {
		start := time.Now()
		harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = int32(n) })
		harness.WaitScaled(t, vc, n, 1, harness.RollTimeout)
		t.Logf("%s: %d shards in %s", version, n, time.Since(start).Round(100*time.Millisecond))
		harness.CheckEvenSpread(t, vc, n)
		harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: slot moves lose none", r.LostUnreplicated)
	}
	harness.ReportMoveRefusals(t, r)
	harness.CheckMethod(t, ns, version)
	if version == localcluster.Valkey9Version {
		checkReplicationUserNarrow(t, vc)
	}
}

// TestReshardDuringUpgrade: a reshard in the middle of a rolling image upgrade, so that slots
// move between nodes of different Valkey versions. A 3×1 on Valkey 8.0.1 with 200 k keys, the
// 16-slot writer on; its config is repointed at a 9.1.2 image. The interleaving:
//
//  1. as soon as one node runs 9.1.2 (shard 0's first new replica) beside the 8.0.1 ones,
//     shards 3 → 4: the new shard's nodes are 9.1.2, and the roll goes on while they join;
//  2. as soon as the scale-out's first batch logs `moved slots`, shards 4 → 3: a scale-out
//     reverted half-way. Slot moves come before the roll in the planner chain, so the revert
//     finds the roll where the scale-out's moves found it: with the 8.0.1 primaries of shards
//     not rolled yet (in the runs so far, all three). The scale-out moved 8.x → 9.x (classic);
//     the revert gives the 9.x shard's slots back, which an 8.x primary cannot take (it refuses
//     9.1.2's DUMP payloads): they wait for the roll to replace each target, then move 9.x → 9.x
//     (atomic once both nodes enforce the replication user's import grant).
//
// It converges: Active and Ready with 3 shards of 1 replica, every node replaced and running
// 9.1.2 (INFO server), every slot served once, spread even, every seeded and acknowledged key
// read back (no node is killed, so no loss is allowed), one failover per shard for the roll, and
// the replication users narrow again. The method of each `moved slots` line is checked against
// the versions of its two nodes for what the design guarantees (nothing atomic with an 8.x side,
// nothing from a 9.x node into an 8.x one); which methods and pairs occurred depends on timing
// and is logged.
func TestReshardDuringUpgrade(t *testing.T) {
	const ns = "reshard-roll"
	vc := harness.VersionedCluster(t, ns, "8.0.1", 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, reshardKeys, harness.OpenUser)
	nine := harness.NewImage(ns + "-image9")
	nine.Spec.Tag, nine.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
	harness.Create(t, nine)
	before := harness.PodNameSet(t, vc)
	images := nodeImages(t, ns)
	created := harness.WatchCreatedNodes(t, ns)
	w, opts := harness.StartClusterWriter(t, vc)

	start := time.Now()
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.ImageRef = nine.Name })
	mixed := waitMixedVersions(t, vc, 3*time.Minute)
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	t.Logf("shards 3 -> 4 %s after the image edit, nodes running %v", time.Since(start).Round(100*time.Millisecond), mixed)
	harness.WaitLine(t, logging.MsgMovingSlots, ns, 0, 3*time.Minute)
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 3 })
	t.Logf("shards 4 -> 3 %s after the image edit, nodes running %v", time.Since(start).Round(100*time.Millisecond), runningVersions(t, vc))

	harness.WaitRolled(t, vc, 3, 1, before, harness.RollTimeout)
	t.Logf("rolled to %s with 3 shards, Active and Ready, %s after the image edit", localcluster.Valkey9Version, time.Since(start).Round(100*time.Millisecond))
	for _, p := range harness.Pods(t, vc) {
		if v := harness.ValkeyVersion(t, vc, p); v != localcluster.Valkey9Version {
			t.Errorf("%s: valkey_version %s after the upgrade", p.Name, v)
		}
	}
	harness.CheckEvenSpread(t, vc, 3)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: a graceful failover and slot moves lose none", r.LostUnreplicated)
	}
	harness.ReportMoveRefusals(t, r)
	harness.CheckFailoversPerShard(t, vc, 3)
	for _, n := range created() {
		images[n.Name] = n.Image
	}
	checkMethodsByVersion(t, ns, images)
	checkReplicationUserNarrow(t, vc)
}

// nodeImages maps each ValkeyNode of ns to its image (spec.image: what its pod runs all its life).
func nodeImages(t *testing.T, ns string) map[string]string {
	t.Helper()
	var list v1.ValkeyNodeList
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Spec.Image
	}
	return out
}

// runningVersions asks every running pod of vc for its valkey_version; a node that does not
// answer yet is left out.
func runningVersions(t *testing.T, vc *v1.ValkeyCluster) map[string]string {
	t.Helper()
	creds := harness.Creds(t, vc)
	out := map[string]string{}
	for _, p := range harness.Pods(t, vc) {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			continue
		}
		info, err := c.Info(context.Background(), "server")
		c.Close()
		if err == nil {
			out[p.Name] = info["valkey_version"]
		}
	}
	return out
}

// waitMixedVersions waits until at least one node of vc runs Valkey 9.1.2 and at least one still
// runs another version, and returns what each running node said.
func waitMixedVersions(t *testing.T, vc *v1.ValkeyCluster, timeout time.Duration) map[string]string {
	t.Helper()
	// Its own loop, every 100 ms rather than harness.Poll's 250 ms: the mixed state lasts one node's replacement.
	deadline := time.Now().Add(timeout)
	for {
		got := runningVersions(t, vc)
		nine := 0
		for _, v := range got {
			if v == localcluster.Valkey9Version {
				nine++
			}
		}
		if nine > 0 && nine < len(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node ran %s beside an older one within %s: %v", localcluster.Valkey9Version, timeout, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMethodsByVersion sorts the `moved slots` lines of ns by method and by the Valkey major of
// their source and target (from images: node -> image). A pair with a Valkey 8 side cannot move
// atomically (8.x has no CLUSTER MIGRATESLOTS), and nothing moves from a 9.x node into an 8.x
// one (8.x refuses 9.x's DUMP payloads): such a line fails the test. Everything else is logged:
// which methods and which mixed pairs the run's timing produced.
func checkMethodsByVersion(t *testing.T, ns string, images map[string]string) {
	t.Helper()
	major := func(pod string) string {
		img, ok := images[pod]
		if !ok {
			return "?"
		}
		tag := img[strings.LastIndex(img, ":")+1:]
		return strings.SplitN(tag, ".", 2)[0]
	}
	per := map[string]int{}
	methods := map[string]bool{}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() != logging.MsgMovingSlots || !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		src, _ := l.Fields[logging.FieldPod].(string)
		dst, _ := l.Fields[logging.FieldTarget].(string)
		method, _ := l.Fields[logging.FieldMethod].(string)
		slots, _ := l.Fields[logging.FieldSlots].(float64)
		pair := major(src) + "->" + major(dst)
		per[method+" "+pair] += int(slots)
		methods[method] = true
		if method == logging.MethodAtomic && (major(src) != "9" || major(dst) != "9") {
			t.Errorf("%s -> %s (Valkey %s) moved %d slots atomically", src, dst, pair, int(slots))
		}
		if major(src) == "9" && major(dst) == "8" {
			t.Errorf("%s -> %s moved %d slots from Valkey 9 into 8, which refuses 9's DUMP payloads", src, dst, int(slots))
		}
	}
	t.Logf("slots moved by method and Valkey major of source -> target: %v", per)
	if len(methods) == 0 {
		t.Fatalf("no %q line", logging.MsgMovingSlots)
	}
	for _, m := range []string{logging.MethodAtomic, logging.MethodClassic} {
		if !methods[m] {
			t.Logf("no pair moved with method %s in this run", m)
		}
	}
	if per[logging.MethodClassic+" 8->9"] == 0 {
		t.Logf("no slot moved between an 8.x and a 9.x node in this run: the roll was ahead of the reshard")
	}
}

// checkReplicationUserNarrow: once the reshard is over, every node's replication user is back to
// replicating only (no key, no write command), within a minute of the cluster being Ready.
func checkReplicationUserNarrow(t *testing.T, vc *v1.ValkeyCluster) {
	t.Helper()
	creds := harness.Creds(t, vc)
	deadline := time.Now().Add(time.Minute) // for every node
	for _, p := range harness.Pods(t, vc) {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		harness.WaitFor(t, p.Name+": the replication user without the slot import rules", time.Until(deadline), func() string {
			line, err := "", error(nil)
			var list []string
			if list, err = c.ACLList(context.Background()); err == nil {
				for _, l := range list {
					if strings.HasPrefix(l, "user _momento_repl ") {
						line = l
					}
				}
			}
			if err == nil && line != "" && !strings.Contains(line, "@write") && !strings.Contains(line, "~*") {
				return ""
			}
			return fmt.Sprintf("%v %q", err, line)
		})
		c.Close()
	}
}

// TestOpenSlotIsSettled: a slot left MIGRATING by hand on an Active cluster (as an interrupted
// move leaves it) is settled by the operator: no node reports an open slot any more, every slot
// is served once, and the slot's keys read back.
func TestOpenSlotIsSettled(t *testing.T) {
	ns := "open-slot"
	vc := harness.ActiveCluster(t, ns, 2, 1)
	harness.WaitReady(t, vc, 2, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, 2000, harness.OpenUser)
	creds := harness.Creds(t, vc)
	var src, dst *valkey.Client
	var srcID, dstID string
	for _, p := range harness.Pods(t, vc) {
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
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
	harness.WaitFor(t, fmt.Sprintf("slot %d settled", open), 2*time.Minute, func() string {
		for _, c := range []*valkey.Client{src, dst} {
			entries, err := c.ClusterNodes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if me, _ := valkey.Myself(entries); len(me.Migrating) > 0 || len(me.Importing) > 0 {
				return "still open"
			}
		}
		return ""
	})
	harness.WaitReady(t, vc, 2, 1, nil, time.Minute)
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	if harness.CountLines(t, logging.MsgMovingSlots, ns, "") == 0 && harness.CountLines(t, logging.MsgClosingSlot, ns, "") == 0 {
		t.Errorf("the slot was settled without a %q or %q line", logging.MsgMovingSlots, logging.MsgClosingSlot)
	}
}

// TestReshardLowMaxclients: a 3x1 on 8.0.1 whose ValkeyConfig sets maxclients 48 is resharded
// 3 -> 4 under the writer. The classic mover's pooled connections to a node are capped at a
// quarter of its maxclients: no node refuses a connection (INFO stats rejected_connections), no
// write is refused for long, every key reads back. Before the cap (break test): 8702 refused
// connections on the target, application writes reset, 4 min 13 s instead of ~30 s.
func TestReshardLowMaxclients(t *testing.T) {
	const ns = "reshard-maxclients"
	harness.SetupNamespace(t, ns)
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = "8.0.1", "8.0.1"
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	cfg.Spec.Valkey["maxclients"] = "48"
	harness.Create(t, img, cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(1))
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	seeded := harness.SeedKeys(t, vc, harness.FaultKeys, harness.OpenUser)
	w, opts := harness.StartClusterWriter(t, vc)
	before := rejectedConnections(t, vc)
	t.Logf("connections refused before the reshard: %v", before)
	start := time.Now()
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	peaks := watchClients(t, vc)
	harness.WaitScaled(t, vc, 4, 1, harness.RollTimeout)
	for pod, peak := range peaks() {
		t.Logf("%s: most clients at once %d: %v", pod, peak.total, peak.kinds)
	}
	t.Logf("4 shards in %s", time.Since(start).Round(100*time.Millisecond))
	harness.ReportMoveRefusals(t, harness.FinishWriter(t, w, vc, opts))
	harness.CheckSeeded(t, vc, seeded, harness.OpenUser)
	for pod, n := range rejectedConnections(t, vc) {
		if n > before[pod] {
			t.Errorf("%s refused %d connections during the reshard (maxclients 48)", pod, n-before[pod])
		}
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if strings.HasSuffix(l.Ref(), "."+ns) && strings.Contains(l.Raw, "max number of clients") {
			t.Errorf("the mover ran into maxclients: %s", l.Raw)
			break
		}
	}
}

// rejectedConnections is each running pod's rejected_connections (INFO stats), by pod name.
func rejectedConnections(t *testing.T, vc *v1.ValkeyCluster) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range harness.Pods(t, vc) {
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(p)}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		stats, err := c.Do(ctx, c.B().Info().Section("stats").Build()).ToString()
		if err != nil {
			c.Close()
			t.Fatalf("%s: INFO stats: %v", p.Name, err)
		}
		for _, line := range strings.Split(stats, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rejected_connections:"); ok {
				out[p.Name], _ = strconv.Atoi(v)
			}
		}
		c.Close()
	}
	return out
}

type clientPeak struct {
	total int
	kinds map[string]int
}

// watchClients samples CLIENT LIST on every running pod every 100 ms, over a connection opened
// before (so that maxclients does not refuse it), until the returned function is called, which
// gives each pod's largest client count and what those clients were (user/name).
func watchClients(t *testing.T, vc *v1.ValkeyCluster) func() map[string]clientPeak {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	peaks := map[string]clientPeak{}
	for _, p := range harness.Pods(t, vc) {
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(p)}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				list, err := c.Do(context.Background(), c.B().ClientList().Build()).ToString()
				if err != nil {
					continue
				}
				kinds, n := clientKinds(list)
				mu.Lock()
				if n > peaks[p.Name].total {
					peaks[p.Name] = clientPeak{total: n, kinds: kinds}
				}
				mu.Unlock()
			}
		})
	}
	return func() map[string]clientPeak {
		close(stop)
		wg.Wait()
		return peaks
	}
}

// clientKinds counts the clients of a CLIENT LIST reply by user/name, and in all.
func clientKinds(list string) (map[string]int, int) {
	kinds := map[string]int{}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	for _, line := range lines {
		var name, user string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok {
				name = v
			} else if v, ok := strings.CutPrefix(f, "user="); ok {
				user = v
			}
		}
		kinds[user+"/"+name]++
	}
	return kinds, len(lines)
}
