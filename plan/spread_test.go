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
	"github.com/gomomento/valkey-operator/slot"
)

// copyAt is one copy of a shard in a layout: where it runs and whether it is the primary.
type copyAt struct {
	name      string
	shard     int
	zone      string
	primary   bool
	movedFrom string
}

// layoutSnapshot builds a healthy, formed, synced snapshot of copies: every node Active, of the
// current spec, meshed, replicas caught up.
func layoutSnapshot(shards, replicas int, zones, up []string, copies []copyAt) fsm.Snapshot {
	s := fsm.Snapshot{State: fsm.Active, Shards: shards, ReplicasPerShard: replicas, SpecHash: "h", Zones: zones, ZonesUp: up,
		FormedAt: time.Unix(1, 0), ReadySince: time.Unix(1, 0), Now: time.Unix(1000, 0)}
	even := slot.EvenSpread(shards)
	primaryID := map[int]string{}
	for _, c := range copies {
		if c.primary {
			primaryID[c.shard] = "id-" + c.name
		}
	}
	for i, c := range copies {
		n := &fsm.Node{Reachable: true, ID: "id-" + c.name, Primary: c.primary, ClusterStateOK: true, SlotsAssigned: slot.Count, ReplOffset: 1000}
		if c.primary {
			n.MySlots = slot.Set{even[c.shard]}
		} else {
			n.PrimaryID, n.LinkUp = primaryID[c.shard], true
		}
		s.Pods = append(s.Pods, fsm.Pod{Name: c.name, Shard: c.shard, Phase: fsm.PodRunning, IP: fmt.Sprintf("10.244.0.%d", i+2), Ready: true,
			SpecHash: "h", Lifecycle: string(v1.LifecycleActive), Zone: c.zone, MovedFrom: c.movedFrom, Node: n, LastNodeID: n.ID})
	}
	for i := range s.Pods {
		s.Pods[i].Node.Known = map[string]slot.Set{}
		s.Pods[i].Node.Follows = map[string]string{}
		for _, q := range s.Pods {
			s.Pods[i].Node.Known[q.Node.ID] = q.Node.MySlots
			if !q.Node.Primary {
				s.Pods[i].Node.Follows[q.Node.ID] = q.Node.PrimaryID
			}
		}
	}
	slices.SortFunc(s.Pods, func(a, b fsm.Pod) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// apply plays a pass's actions on copies as the executor and Valkey would: a failover swaps the
// shard's primary, a new copy joins caught up in its zone, a retired copy goes; a move settles
// once its shard is back to its count (the settled moves planner, upkeep.go).
func apply(t *testing.T, copies []copyAt, replicas int, p Plan, next *int) []copyAt {
	t.Helper()
	for _, a := range p.Actions {
		f, isFailover := a.(Failover)
		c, isCreate := a.(CreatePod)
		d, isDelete := a.(DeletePod)
		switch {
		case isFailover:
			for i := range copies {
				if copies[i].shard == f.Shard {
					copies[i].primary = copies[i].name == f.Pod
				}
			}
		case isCreate:
			if c.Zone == "" {
				t.Fatalf("a healthy cluster got a pod created for shard %d without a zone", c.Shard)
			}
			*next++
			copies = append(copies, copyAt{name: fmt.Sprintf("n%03d", *next), shard: c.Shard, zone: c.Zone, movedFrom: c.MovedFrom})
		case isDelete:
			copies = slices.DeleteFunc(copies, func(c copyAt) bool { return c.name == d.Pod })
		default:
			t.Fatalf("unexpected action %s", a)
		}
	}
	count := map[int]int{}
	for _, c := range copies {
		count[c.shard]++
	}
	for i := range copies {
		if count[copies[i].shard] <= replicas+1 {
			copies[i].movedFrom = ""
		}
	}
	return copies
}

// spreadOK says whether copies are spread as the planner promises, "" when they are.
func spreadOK(shards int, up []string, copies []copyAt) string {
	primaries, pods := map[string]int{}, map[string]int{}
	byShard := map[int]map[string]int{}
	for _, c := range copies {
		pods[c.zone]++
		if c.primary {
			primaries[c.zone]++
		}
		if byShard[c.shard] == nil {
			byShard[c.shard] = map[string]int{}
		}
		byShard[c.shard][c.zone]++
	}
	limit := (shards + len(up) - 1) / len(up)
	lo, hi := -1, 0
	for _, z := range up {
		if primaries[z] > limit {
			return fmt.Sprintf("zone %s holds %d primaries, at most %d wanted", z, primaries[z], limit)
		}
		if lo < 0 || pods[z] < lo {
			lo = pods[z]
		}
		hi = max(hi, pods[z])
	}
	if hi-lo > 1 {
		return fmt.Sprintf("pods per zone %v", pods)
	}
	for shard, zs := range byShard {
		if len(zs) < min(len(up), len(copies)/shards) {
			return fmt.Sprintf("shard %d in zones %v", shard, zs)
		}
	}
	return ""
}

// playSpread plays the chain on copies until a pass plans nothing, within limit passes, as the
// executor and Valkey would (apply), and fails the test when a pass is blocked or broken,
// retires anything but the copy a move replaces, moves a copy into a zone not up, or leaves a
// shard with fewer copies than wanted. It returns the copies it ends with and how many spread
// failovers and copy creations it played.
func playSpread(t *testing.T, trial, shards, replicas int, zones, up []string, copies []copyAt, limit int) (end []copyAt, failovers, moves int) {
	t.Helper()
	start := slices.Clone(copies)
	next := 0
	for step := 0; ; step++ {
		if step > limit {
			t.Fatalf("trial %d (%dx%d, zones %v up %v, from %v): no end after %d passes: %v", trial, shards, replicas, zones, up, start, limit, copies)
		}
		p := Pass(fsm.Active, layoutSnapshot(shards, replicas, zones, up, copies))
		if p.Err != nil || p.Blocked != "" {
			t.Fatalf("trial %d: %v %s", trial, p.Err, p.Blocked)
		}
		if len(p.Actions) == 0 {
			return copies, failovers, moves
		}
		for _, a := range p.Actions {
			if _, ok := a.(Failover); ok {
				failovers++
			}
			if c, ok := a.(CreatePod); ok {
				moves++
				if !slices.Contains(up, c.Zone) {
					t.Fatalf("trial %d: a copy moved to %q, not a zone up %v", trial, c.Zone, up)
				}
			}
			if d, ok := a.(DeletePod); ok && d.Reason != RetireMoved {
				t.Fatalf("trial %d: retired %s: %s", trial, d.Pod, d.Reason)
			}
		}
		copies = apply(t, copies, replicas, p, &next)
		count := map[int]int{}
		for _, c := range copies {
			count[c.shard]++
		}
		for sh := range shards {
			if count[sh] < replicas+1 {
				t.Fatalf("trial %d: shard %d down to %d copies", trial, sh, count[sh])
			}
		}
	}
}

// TestSpreadConverges plays the chain on random healthy layouts of 1-6 shards with 1-2
// replicas over three zones: every layout ends spread (no zone above its share of primaries,
// pods per zone within one, each shard in as many zones as it has copies), the moves end, and
// no step ever leaves a shard with fewer copies than wanted or a zone's copy retired before its
// replacement joined.
func TestSpreadConverges(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	rng := rand.New(rand.NewPCG(24, 24))
	for trial := range 400 {
		shards, replicas := 1+rng.IntN(6), 1+rng.IntN(2)
		var copies []copyAt
		for sh := range shards {
			for i := range replicas + 1 {
				copies = append(copies, copyAt{name: fmt.Sprintf("p%d-%d", sh, i), shard: sh, zone: zones[rng.IntN(3)], primary: i == 0})
			}
		}
		start := slices.Clone(copies)
		copies, failovers, moves := playSpread(t, trial, shards, replicas, zones, zones, copies, 60)
		if why := spreadOK(shards, zones, copies); why != "" {
			t.Fatalf("trial %d (%dx%d from %v): ended unspread: %s: %v", trial, shards, replicas, start, why, copies)
		}
		if trial < 5 {
			t.Logf("trial %d: %dx%d: %d failovers, %d moves", trial, shards, replicas, failovers, moves)
		}
	}
}

// The zone-loss drill's layout after zone-b came back: the lost zone's copies were replaced in
// the two others, so zone-b holds nothing and zone-c two primaries. A copy moves to zone-b first
// (no replica there to hand a primary to), then the primary follows.
func TestSpreadAfterZoneReturns(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "c0", shard: 0, zone: "zone-c"},
		{name: "c1", shard: 1, zone: "zone-c", primary: true}, {name: "a1", shard: 1, zone: "zone-a"},
		{name: "c2", shard: 2, zone: "zone-c", primary: true}, {name: "a2", shard: 2, zone: "zone-a"},
	}
	s := layoutSnapshot(3, 1, zones, zones, copies)
	p := Pass(fsm.Active, s)
	want := CreatePod{Shard: 1, Zone: "zone-b", MovedFrom: "zone-a"}
	if len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("got %v, want %v", p.Actions, want)
	}
	// While zone-b is still down, nothing moves: two primaries in zone-c is its share of two zones.
	s = layoutSnapshot(3, 1, zones, []string{"zone-a", "zone-c"}, copies)
	if p := Pass(fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("zone-b down: got %v, want nothing", p.Actions)
	}
}

// A moved copy that has joined retires the copy in the zone it came from, not the least caught
// up replica; one that cannot be scheduled is retired itself, and is not a stalled roll.
func TestSpreadMoveRetiresTheCopyItReplaces(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "c0", shard: 0, zone: "zone-c"},
		{name: "b0", shard: 0, zone: "zone-b", movedFrom: "zone-c"},
	}
	s := layoutSnapshot(1, 1, zones, zones, copies)
	b0 := &s.Pods[1]         // by name: a0, b0, c0
	b0.Node.ReplOffset = 900 // the new copy trails a little (still caught up)
	p := Pass(fsm.Active, s)
	want := DeletePod{Pod: "c0", Reason: RetireMoved}
	if len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("got %v, want %v", p.Actions, want)
	}
	s = layoutSnapshot(1, 1, zones, zones, copies)
	b0 = &s.Pods[1]
	b0.Lifecycle, b0.Phase, b0.Unschedulable, b0.IP, b0.Node = string(v1.LifecycleJoining), fsm.PodPending, "0/3 nodes are available", "", nil
	p = Pass(fsm.Active, s)
	want = DeletePod{Pod: "b0", Reason: RetireNoRoom}
	if len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("unschedulable move: got %v (waiting %q), want %v", p.Actions, p.Waiting, want)
	}
	// A move still starting is not retired as stuck.
	b0.Unschedulable = ""
	for _, a := range Pass(fsm.Active, s).Actions {
		if d, ok := a.(DeletePod); ok {
			t.Fatalf("a starting move was retired: %v", d)
		}
	}
}

// A replacement avoids its shard's live copies' zones when a zone without one exists; a lost
// copy's zone is not avoided.
func TestReplacementAvoidsSurvivingCopies(t *testing.T) {
	zones := []string{"zone-a", "zone-b"}
	copies := []copyAt{{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "b0", shard: 0, zone: "zone-b"}}
	s := layoutSnapshot(1, 1, zones, []string{"zone-a"}, copies)
	s.Pods[1].NodeLost, s.Pods[1].Node = true, &fsm.Node{}
	p := run(pods, fsm.Active, s)
	want := CreatePod{Shard: 0, Avoid: "zone-a"}
	if len(p.Actions) != 1 || p.Actions[0] != want {
		t.Fatalf("got %v, want %v", p.Actions, want)
	}
	// Three copies over two zones: no zone is free of a copy, nothing is avoided.
	s = layoutSnapshot(1, 2, zones, zones, append(copies, copyAt{name: "a1", shard: 0, zone: "zone-a"}))
	s.Pods[1].Phase = fsm.PodFailed
	if p := run(pods, fsm.Active, s); len(p.Actions) != 1 || p.Actions[0] != (CreatePod{Shard: 0, Avoid: ""}) {
		t.Fatalf("got %v", p.Actions)
	}
}

// A new cluster's primaries are chosen spread over zones: the first pod of every shard sits in
// zone-a, and only one of them becomes a primary there.
func TestFormationSpreadsPrimaries(t *testing.T) {
	zones := map[string]string{"p0-0": "zone-a", "p0-1": "zone-b", "p1-0": "zone-a", "p1-1": "zone-c", "p2-0": "zone-a", "p2-1": "zone-b"}
	s := newSnapshot(fsm.Forming, 3, 1, meshed, func(s *fsm.Snapshot) {
		for i := range s.Pods {
			s.Pods[i].Zone = zones[s.Pods[i].Name]
		}
	})
	got := map[string]string{}
	for _, a := range run(formation, fsm.Forming, s).Actions {
		if add, ok := a.(AddSlots); ok {
			got[zones[add.Pod]] += add.Pod + " "
		}
	}
	if len(got) != 3 {
		t.Fatalf("primaries by zone: %v, want one in each of three zones", got)
	}
}

// A cluster Ready for less than SpreadSettle is left alone: nothing moves right after a heal.
func TestSpreadWaitsForTheClusterToSettle(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "b0", shard: 0, zone: "zone-b"},
		{name: "a1", shard: 1, zone: "zone-a", primary: true}, {name: "c1", shard: 1, zone: "zone-c"},
	}
	s := layoutSnapshot(2, 1, zones, zones, copies)
	if p := Pass(fsm.Active, s); len(p.Actions) != 1 {
		t.Fatalf("settled: got %v, want one spread failover", p.Actions)
	}
	s.ReadySince = s.Now.Add(-SpreadSettle + time.Second)
	if p := Pass(fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("Ready %s ago: got %v, want nothing", SpreadSettle-time.Second, p.Actions)
	}
	s.ReadySince = time.Time{}
	if p := Pass(fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("not Ready: got %v, want nothing", p.Actions)
	}
}

// The spread hands one primary over per pass, and the next handover waits until every node's
// view shows the last one: until the other primaries have heard that the old primary is a
// replica now, they would refuse it their vote if the new primary died (chaos seed 60606).
func TestSpreadWaitsForTheViewsToAgree(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "b0", shard: 0, zone: "zone-b"},
		{name: "a1", shard: 1, zone: "zone-a", primary: true}, {name: "c1", shard: 1, zone: "zone-c"},
	}
	s := layoutSnapshot(2, 1, zones, zones, copies)
	for i := range s.Pods {
		if s.Pods[i].Name == "a1" {
			delete(s.Pods[i].Node.Follows, "id-b0") // a1 has not heard that b0 follows a0
		}
	}
	if got := s.RolesDisagree(); got != "a1 still sees b0 as a primary" {
		t.Fatalf("RolesDisagree = %q", got)
	}
	if p := Pass(fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("a view behind: got %v, want nothing", p.Actions)
	}
}

// A move the scheduler refuses is given up only after MoveRoomWait (a cluster autoscaler adds a
// node to the zone in a minute or two), and a move that runs but never joins after
// MoveJoinBound; before either, it is left to come.
func TestMoveGivenUpOnlyAfterItsBounds(t *testing.T) {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	copies := []copyAt{
		{name: "a0", shard: 0, zone: "zone-a", primary: true}, {name: "c0", shard: 0, zone: "zone-c"},
		{name: "b0", shard: 0, zone: "zone-b", movedFrom: "zone-c"},
	}
	retired := func(s fsm.Snapshot) []DeletePod {
		var out []DeletePod
		for _, a := range Pass(fsm.Active, s).Actions {
			if d, ok := a.(DeletePod); ok {
				out = append(out, d)
			}
		}
		return out
	}
	pending := func(since time.Duration) fsm.Snapshot {
		s := layoutSnapshot(1, 1, zones, zones, copies)
		if s.Now.IsZero() {
			s.Now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		}
		b0 := &s.Pods[1]
		b0.Lifecycle, b0.Phase, b0.Unschedulable, b0.IP, b0.Node = string(v1.LifecycleJoining), fsm.PodPending, "0/3 nodes are available", "", nil
		b0.UnschedulableSince = s.Now.Add(-since)
		return s
	}
	if d := retired(pending(time.Minute)); len(d) != 0 {
		t.Errorf("refused for 1 min: retired %v", d)
	}
	if d := retired(pending(MoveRoomWait)); len(d) != 1 || d[0] != (DeletePod{Pod: "b0", Reason: RetireNoRoom}) {
		t.Errorf("refused for %s: retired %v, want b0 (%s)", MoveRoomWait, d, RetireNoRoom)
	}
	joining := func(age time.Duration) fsm.Snapshot {
		s := layoutSnapshot(1, 1, zones, zones, copies)
		if s.Now.IsZero() {
			s.Now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		}
		b0 := &s.Pods[1]
		b0.Lifecycle = string(v1.LifecycleJoining)
		b0.Node.LinkUp, b0.Node.ReplOffset = false, 0 // attached, never synced
		b0.Created = s.Now.Add(-age)
		return s
	}
	if d := retired(joining(time.Minute)); len(d) != 0 {
		t.Errorf("running 1 min, not joined: retired %v", d)
	}
	if d := retired(joining(MoveJoinBound)); len(d) != 1 || d[0] != (DeletePod{Pod: "b0", Reason: RetireMoveStalled}) {
		t.Errorf("running %s, not joined: retired %v (waiting %q), want b0 (%s)", MoveJoinBound, d, Pass(fsm.Active, joining(MoveJoinBound)).Waiting, RetireMoveStalled)
	}
}
