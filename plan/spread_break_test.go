package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// TestSpreadConvergesBroadly widens TestSpreadConverges: 2-4 zones of which any two or more are
// up (pods may run in a zone that is down: cordoned, tainted), zones that hold no pod,
// replicasPerShard 0-2, 1-10 shards. The chain must stop acting within a bound, never leave a
// shard short, and retire only the copy a move replaces.
func TestSpreadConvergesBroadly(t *testing.T) {
	all := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 500 {
		zones := all[:2+rng.IntN(3)]
		up := slices.Clone(zones)
		for len(up) > 2 && rng.IntN(2) == 0 {
			i := rng.IntN(len(up))
			up = slices.Delete(up, i, i+1)
		}
		// Pods only in some zones: a zone with no pods at all is common after a loss.
		holds := zones[:1+rng.IntN(len(zones))]
		shards, replicas := 1+rng.IntN(10), rng.IntN(3)
		var copies []copyAt
		for sh := range shards {
			for i := range replicas + 1 {
				copies = append(copies, copyAt{name: fmt.Sprintf("p%02d-%d", sh, i), shard: sh, zone: holds[rng.IntN(len(holds))], primary: i == 0})
			}
		}
		start := slices.Clone(copies)
		copies, _, _ = playSpread(t, trial, shards, replicas, zones, up, copies, 4*shards*(replicas+1)+20)
		if why := endState(shards, replicas, up, copies); why != "" {
			t.Errorf("trial %d (%dx%d, zones %v up %v, from %v): ended %s: %v", trial, shards, replicas, zones, up, start, why, copies)
		}
	}
}

// endState is what the planner's rules promise of the layout it stops at, "" when it holds:
// no shard keeps two copies in one zone while a zone up holds none of its copies (rule 3a), and
// with a replica per shard, no zone holds more than its share of primaries over the zones up
// (rules 2 and 3b; a zone that takes no new pods keeps the primaries it runs: overCap).
func endState(shards, replicas int, up []string, copies []copyAt) string {
	byShard := map[int]map[string]int{}
	primaries := map[string]int{}
	for _, c := range copies {
		if byShard[c.shard] == nil {
			byShard[c.shard] = map[string]int{}
		}
		byShard[c.shard][c.zone]++
		if c.primary {
			primaries[c.zone]++
		}
	}
	for sh, zs := range byShard {
		shared, missing := false, false
		for _, n := range zs {
			shared = shared || n > 1
		}
		for _, z := range up {
			missing = missing || zs[z] == 0
		}
		if shared && missing {
			return fmt.Sprintf("shard %d shares a zone while a zone up has none of it: %v", sh, zs)
		}
	}
	if replicas > 0 {
		limit := (shards + len(up) - 1) / len(up)
		for z, n := range primaries {
			if n > limit {
				return fmt.Sprintf("zone %s holds %d primaries, limit %d", z, n, limit)
			}
		}
	}
	return ""
}

// TestZonedPassesAreSafe is TestOneDisruptiveActionPerPass for zoned clusters, which its
// generator never builds (no pod has a zone, no zone is up, no copy is moving), so the spread
// planner and the moved-copy rules never run there. Random layouts over 2-3 zones, a copy of
// one shard possibly moving (pending, unschedulable, syncing, joined, caught up or not), lagging
// and cut replicas, dead and unreachable pods, a spec or a replica count changed, failover
// intents. Every pass: at most one disruptive action; a graceful failover only onto an Active
// replica caught up with the live primary it replaces, never while one is awaited; a retirement
// never of a primary, and a surplus, outdated or moved-copy retirement never leaves the shard's
// primary with fewer caught-up replicas than wanted (or than it had); a copy moves only into a
// zone up.
func TestZonedPassesAreSafe(t *testing.T) {
	all := []string{"zone-a", "zone-b", "zone-c"}
	rng := rand.New(rand.NewPCG(3, 2026))
	books := rand.New(rand.NewPCG(22, 2026)) // the bookkeeping's inputs: TestOneDisruptiveActionPerPass
	kinds := map[string]int{}
	for i := range 4000 {
		s := randomZoned(rng, all)
		randomBookkeeping(books, &s)
		for _, st := range []fsm.State{fsm.Active, fsm.Upgrading} {
			p := Pass(st, s)
			if p.Err != nil {
				t.Fatalf("snapshot %d, %s: %v\n%s", i, st, p.Err, zdump(s))
			}
			n := 0
			for _, a := range p.Actions {
				if _, ok := a.(SettleMove); ok {
					kinds["settle"]++
				}
				if c, ok := a.(CreatePod); ok && c.Zone != "" {
					kinds["move"]++
					if !slices.Contains(s.ZonesUp, c.Zone) {
						t.Fatalf("snapshot %d: %v into a zone not up %v\n%s", i, a, s.ZonesUp, zdump(s))
					}
				}
				if !a.Disruptive() {
					continue
				}
				n++
				checkZonedSafe(t, i, s, a, kinds)
			}
			if n > 1 {
				t.Fatalf("snapshot %d, %s: %d disruptive actions: %v\n%s", i, st, n, p.Actions, zdump(s))
			}
		}
	}
	for _, k := range []string{"move", "settle", "spread failover", "roll", RetireMoved, RetireNoRoom, RetireSurplus, RetireOutdated} {
		if kinds[k] == 0 {
			t.Errorf("no snapshot planned a %s: %v", k, kinds)
		}
	}
	t.Logf("%v", kinds)
}

func checkZonedSafe(t *testing.T, i int, s fsm.Snapshot, a Action, kinds map[string]int) {
	t.Helper()
	live := s.LivePods()
	byName := map[string]fsm.Pod{}
	byID := map[string]fsm.Pod{}
	for _, p := range live {
		byName[p.Name] = p
		if p.Node != nil && p.Node.Reachable {
			byID[p.Node.ID] = p
		}
	}
	if f, ok := a.(Failover); ok {
		checkZonedFailover(t, i, s, f, byName, byID, kinds)
	}
	d, ok := a.(DeletePod)
	if !ok {
		return
	}
	kinds[d.Reason]++
	gone, ok := byName[d.Pod]
	if !ok {
		return // a dead pod cleaned up
	}
	if gone.Node != nil && gone.Node.Reachable && len(gone.Node.MySlots) > 0 {
		t.Fatalf("snapshot %d: %v retires a primary serving slots\n%s", i, d, zdump(s))
	}
	if d.Reason != RetireMoved && d.Reason != RetireSurplus && d.Reason != RetireOutdated {
		return
	}
	primary := fsm.ShardPrimary(s.ShardPods()[gone.Shard])
	before, after := 0, 0
	for _, r := range live {
		if fsm.CaughtUp(r, *primary) {
			before++
			if r.Name != gone.Name {
				after++
			}
		}
	}
	if after < min(s.ReplicasPerShard, before) {
		t.Fatalf("snapshot %d: %v leaves %s with %d caught-up replicas (had %d, %d wanted)\n%s", i, d, primary.Name, after, before, s.ReplicasPerShard, zdump(s))
	}
}

func checkZonedFailover(t *testing.T, i int, s fsm.Snapshot, a Failover, byName, byID map[string]fsm.Pod, kinds map[string]int) {
	t.Helper()
	switch a.Purpose {
	case Spread:
		kinds["spread failover"]++
	case Roll:
		kinds["roll"]++
	case HandOver, Realign:
		return // failovers of lost primaries: TestOneDisruptiveActionPerPass
	default:
		return // failovers of lost primaries: TestOneDisruptiveActionPerPass
	}
	to, primary := byName[a.Pod], byID[a.PrimaryID]
	if to.Lifecycle != string(v1.LifecycleActive) || !fsm.CaughtUp(to, primary) {
		t.Fatalf("snapshot %d: %v onto %s, not an Active replica caught up with %s\n%s", i, a, a.Pod, a.PrimaryID, zdump(s))
	}
	if f := s.Failover; f != nil && s.Now.Sub(f.StartedAt) < FailoverRetry && (a.Purpose == Spread || f.PrimaryID == a.PrimaryID) {
		t.Fatalf("snapshot %d: %v while a failover issued %s ago is awaited\n%s", i, a, s.Now.Sub(f.StartedAt), zdump(s))
	}
}

// randomZoned draws a zoned cluster in some state of a move or a fault.
func randomZoned(rng *rand.Rand, all []string) fsm.Snapshot {
	zones := all[:2+rng.IntN(2)]
	up := slices.Clone(zones)
	if rng.IntN(3) == 0 {
		i := rng.IntN(len(up))
		up = slices.Delete(up, i, i+1)
	}
	shards, replicas := 1+rng.IntN(5), rng.IntN(3)
	var copies []copyAt
	for sh := range shards {
		for k := range replicas + 1 {
			copies = append(copies, copyAt{name: fmt.Sprintf("p%d-%d", sh, k), shard: sh, zone: zones[rng.IntN(len(zones))], primary: k == 0})
		}
	}
	moving := -1
	if rng.IntN(3) > 0 {
		moving = rng.IntN(shards)
		from := copies[moving*(replicas+1)+rng.IntN(replicas+1)].zone
		copies = append(copies, copyAt{name: fmt.Sprintf("m%d", moving), shard: moving, zone: up[rng.IntN(len(up))], movedFrom: from})
	}
	s := layoutSnapshot(shards, replicas, zones, up, copies)
	for k := range s.Pods {
		p := &s.Pods[k]
		if p.Node.Primary {
			p.Node.ReplOffset = 5 << 20
			continue
		}
		switch rng.IntN(8) {
		case 0:
			p.Node.ReplOffset = 1 << 20 // lags by 4 MiB: not caught up
		case 1:
			p.Node.LinkUp = false
		default:
			p.Node.ReplOffset = 5<<20 - int64(rng.IntN(1000))
		}
		if p.MovedFrom != "" {
			switch rng.IntN(5) {
			case 0: // not scheduled
				p.Lifecycle, p.Phase, p.IP, p.Node, p.Zone = string(v1.LifecycleJoining), fsm.PodPending, "", nil, ""
				if rng.IntN(2) == 0 {
					p.Unschedulable = "0/3 nodes are available"
				}
			case 1: // syncing
				p.Lifecycle, p.Node.SyncInProgress, p.Node.ReplOffset = string(v1.LifecycleJoining), true, 0
			case 2: // joined, still catching up
				p.Node.ReplOffset = 1 << 20
			}
		}
		switch rng.IntN(25) {
		case 0:
			p.Phase, p.Node, p.Exited = fsm.PodFailed, &fsm.Node{Err: "connection refused"}, true
		case 1:
			p.NodeLost, p.Node = true, &fsm.Node{Err: "i/o timeout"}
		case 2:
			p.Node = &fsm.Node{Err: "i/o timeout"}
		}
	}
	switch rng.IntN(6) {
	case 0: // a new spec: some pods already rebuilt
		s.SpecHash = "h2"
		for k := range s.Pods {
			if rng.IntN(3) == 0 {
				s.Pods[k].SpecHash = "h2"
			}
		}
	case 1:
		if s.ReplicasPerShard > 0 {
			s.ReplicasPerShard--
		}
	case 2:
		s.ReplicasPerShard++
	}
	if rng.IntN(4) == 0 {
		p := s.Pods[rng.IntN(len(s.Pods))]
		if p.Node != nil {
			s.Failover = &fsm.FailoverIntent{Shard: p.Shard, Pod: "x", PrimaryID: p.Node.ID, StartedAt: s.Now.Add(-time.Duration(rng.IntN(20)) * time.Second)}
		}
	}
	if moving >= 0 && rng.IntN(4) == 0 {
		s.ZoneMoveHeld = "held"
	}
	return s
}

func zdump(s fsm.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d×%d hash %s zones %v up %v\n", s.Shards, s.ReplicasPerShard, s.SpecHash, s.Zones, s.ZonesUp)
	for _, p := range s.Pods {
		fmt.Fprintf(&b, "  %s shard %d %s zone=%s moved=%s hash=%s lc=%s unsched=%q", p.Name, p.Shard, p.Phase, p.Zone, p.MovedFrom, p.SpecHash, p.Lifecycle, p.Unschedulable)
		if n := p.Node; n != nil {
			fmt.Fprintf(&b, " reach=%v id=%s primary=%v of=%s link=%v off=%d sync=%v slots=%d", n.Reachable, n.ID, n.Primary, n.PrimaryID, n.LinkUp, n.ReplOffset, n.SyncInProgress, n.MySlots.Count())
		}
		b.WriteString("\n")
	}
	if s.Failover != nil {
		fmt.Fprintf(&b, "  failover %+v (now %s)\n", *s.Failover, s.Now)
	}
	return b.String()
}

// The back-off after a refused pod creation holds back every creation of the cluster
// (fsm.Snapshot.CreateHeld, controllers/creates.go: a ResourceQuota at the cluster's pod count
// refuses every surge pod). The spread planner created its copies regardless, so a cluster in
// a namespace whose quota is full made and deleted a ValkeyNode on every pass, for ever.
func TestSpreadHonoursTheCreateBackoff(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "c0", shard: 0, zone: "zone-c"},
		{name: "c1", shard: 1, zone: "zone-c", primary: true}, {name: "a1", shard: 1, zone: "zone-a"},
		{name: "c2", shard: 2, zone: "zone-c", primary: true}, {name: "a2", shard: 2, zone: "zone-a"},
	}
	s := layoutSnapshot(3, 1, zones, zones, copies)
	s.CreateHeld, s.CreateRefused = true, `pod "vc-abcde" could not be created: exceeded quota: pods=6; retrying in 4m`
	for _, a := range Pass(fsm.Active, s).Actions {
		if c, ok := a.(CreatePod); ok {
			t.Fatalf("created %v while creations are held back (%s)", c, s.CreateRefused)
		}
	}
}

// A spec changed while a moved copy catches up (it joined, then fell 4 MiB behind under
// writes): every replica is outdated, the shard has one node too many, and rule 6a retired
// "the first outdated replica by name", here p0-1, the shard's only caught-up replica, keeping
// the lagging one. Were the primary lost next, Valkey could only promote the lagging copy.
func TestRetireOutdatedKeepsTheCaughtUpReplica(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "p0-0", shard: 0, zone: "zone-c", primary: true},
		{name: "p0-1", shard: 0, zone: "zone-a"},
		{name: "x0", shard: 0, zone: "zone-b", movedFrom: "zone-a"},
	}
	s := layoutSnapshot(1, 1, zones, zones, copies)
	s.SpecHash = "h2" // a new spec: nothing is rebuilt yet
	for i := range s.Pods {
		s.Pods[i].Node.ReplOffset = 5 << 20
	}
	s.Pods[2].Node.ReplOffset = 1 << 20 // x0 (pods by name: p0-0, p0-1, x0)
	p := Pass(fsm.Active, s)
	for _, a := range p.Actions {
		if d, ok := a.(DeletePod); ok && d.Pod == "p0-1" {
			t.Fatalf("retired %s, the only replica caught up with the primary; x0 trails by 4 MiB: %v", d.Pod, p.Actions)
		}
	}
}

// The moved-from annotation must outlive a copy's join: a copy pinned to its zone that cannot
// be scheduled is retired (RetireNoRoom) only while it is marked a move, even when its shard is
// no longer above its count (the copy it was to replace died meanwhile); the pods planner then
// replaces it unpinned. The settling of moves (now the settled planner) used to drop the mark as soon as the shard was
// back to its count, joined or not (see controllers/zones_break_test.go), and the pinned pod
// then sat Pending for good, its shard a copy short.
func TestUnschedulableMoveInAShardAtItsCountIsRetired(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "p0-0", shard: 0, zone: "zone-a", primary: true},
		{name: "p0-1", shard: 0, zone: "zone-a"},
		{name: "x0", shard: 0, zone: "zone-b", movedFrom: "zone-a"},
	}
	s := layoutSnapshot(1, 1, zones, []string{"zone-a", "zone-c"}, copies)
	// p0-1, the copy x0 was to replace, died; x0 cannot be scheduled in zone-b.
	s.Pods[1].Phase, s.Pods[1].Node, s.Pods[1].Exited = fsm.PodFailed, &fsm.Node{Err: "connection refused"}, true
	x0 := &s.Pods[2]
	x0.Lifecycle, x0.Phase, x0.IP, x0.Node, x0.Zone, x0.Unschedulable = string(v1.LifecycleJoining), fsm.PodPending, "", nil, "", "0/3 nodes are available"
	p := Pass(fsm.Active, s)
	want := DeletePod{Pod: "x0", Reason: RetireNoRoom}
	if !slices.Contains(p.Actions, Action(want)) {
		t.Fatalf("got %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
	// Without the mark (what that settling left), nothing ever retires or replaces it.
	x0.MovedFrom = ""
	for _, a := range Pass(fsm.Active, s).Actions {
		if d, ok := a.(DeletePod); ok && d.Pod == "x0" {
			return
		}
	}
	t.Logf("unmarked, x0 stays Pending in zone-b for good: the reason the mark must stay until it joins")
}
