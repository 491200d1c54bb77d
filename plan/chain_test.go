package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// fixed is a planner that returns st behind gate.
func fixed(name, gate string, st Step) Planner {
	return Planner{Name: name, Gate: func(Input) string { return gate }, Plan: func(Input) Step { return st }}
}

func TestRun(t *testing.T) {
	harmless := func(shard int) Action { return CreatePod{Shard: shard} }
	cases := []struct {
		name    string
		chain   Chain
		want    []Action
		waiting string
		blocked string
		err     string
	}{
		{"harmless steps of several planners are batched",
			Chain{fixed("a", "", Step{Actions: []Action{harmless(0)}}), fixed("b", "", Step{Actions: []Action{harmless(1)}})},
			[]Action{harmless(0), harmless(1)}, "", "", ""},
		{"a closed gate skips only its planner, and says why",
			Chain{fixed("a", "node x does not answer", Step{Actions: []Action{harmless(0)}}), fixed("b", "", Step{Actions: []Action{harmless(1)}})},
			[]Action{harmless(1)}, "node x does not answer", "", ""},
		{"the first wait ends the pass",
			Chain{fixed("a", "", Step{Actions: []Action{harmless(0)}, Wait: "w"}), fixed("b", "", Step{Actions: []Action{harmless(1)}})},
			[]Action{harmless(0)}, "w", "", ""},
		{"blocked ends the pass",
			Chain{fixed("a", "", Step{Blocked: "bad spec"}), fixed("b", "", Step{Actions: []Action{harmless(1)}})},
			nil, "", "bad spec", ""},
		{"the pass ends after its disruptive step",
			Chain{fixed("a", "", Step{Actions: []Action{harmless(0), DeletePod{Pod: "x"}}}), fixed("b", "", Step{Actions: []Action{harmless(1)}})},
			[]Action{harmless(0), DeletePod{Pod: "x"}}, "", "", ""},
		{"a second disruptive action is a programming error: dropped, reported",
			Chain{fixed("a", "", Step{Actions: []Action{DeletePod{Pod: "x"}, harmless(0), Forget{NodeID: "n"}}})},
			[]Action{DeletePod{Pod: "x"}, harmless(0)}, "", "", "broken invariant: planner a planned"},
		{"a nil action is a programming error",
			Chain{fixed("a", "", Step{Actions: []Action{nil, harmless(0)}})},
			[]Action{harmless(0)}, "", "", "nil action"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.chain.Run(Input{State: fsm.Active})
			if !reflect.DeepEqual(p.Actions, c.want) || p.Waiting != c.waiting || p.Blocked != c.blocked {
				t.Fatalf("got %v %q %q", p.Actions, p.Waiting, p.Blocked)
			}
			if (c.err == "") != (p.Err == nil) || (p.Err != nil && !strings.Contains(p.Err.Error(), c.err)) {
				t.Fatalf("err %v, want %q", p.Err, c.err)
			}
		})
	}
}

// TestRunReportsEveryHold: Waiting is the first reason a planner held back, Holds every one of
// them, closed gates and steps' holds alike, in chain order, named by planner.
func TestRunReportsEveryHold(t *testing.T) {
	chain := Chain{
		fixed("a", "node x does not answer", Step{}),
		fixed("b", "", Step{Actions: []Action{CreatePod{Shard: 1}}, Hold: "no room in zone z"}),
		fixed("c", "", Step{}),
		fixed("d", "shard 2 is moving slots", Step{}),
	}
	p := chain.Run(Input{State: fsm.Active})
	want := []string{"a: node x does not answer", "b: no room in zone z", "d: shard 2 is moving slots"}
	if p.Waiting != "node x does not answer" || !reflect.DeepEqual(p.Holds, want) || len(p.Actions) != 1 {
		t.Fatalf("waiting %q, holds %q, actions %v; want the first reason, %q and the one action", p.Waiting, p.Holds, p.Actions, want)
	}
}

func TestPass(t *testing.T) {
	if p := Pass(fsm.Invalid, newSnapshot(fsm.Invalid, 3, 1, withoutPods)); !reflect.DeepEqual(p, Plan{}) {
		t.Fatalf("invalid plans nothing: %+v", p)
	}
	for _, st := range []fsm.State{fsm.Forming, fsm.Active} {
		if p := Pass(st, newSnapshot(st, 3, 1, formed)); len(p.Actions) != 0 || p.Waiting != "" || p.Blocked != "" {
			t.Fatalf("%s: a formed cluster plans nothing: %+v", st, p)
		}
	}
	if p := Pass(fsm.Bootstrapping, newSnapshot(fsm.Bootstrapping, 1, 0, withoutPods)); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 0}}) || p.Waiting != "waiting for pods" {
		t.Fatalf("bootstrap: %+v", p)
	}
}

// TestOneDisruptiveActionPerPass is the property the runner enforces and the planners respect:
// over many randomly generated snapshots (unreachable nodes, failed, deleting and pending pods,
// missing shards, stale and failed ids, random offsets), no pass holds two disruptive actions,
// no planner ever needs the runner to drop one, no node id a live pod owns is ever forgotten, and
// no replica that never synced is ever promoted.
func TestOneDisruptiveActionPerPass(t *testing.T) {
	const snapshots = 20000
	rng := rand.New(rand.NewPCG(8, 2026))
	// The bookkeeping's inputs (budgets, the ACL Secret, annotations) are drawn from a generator
	// of their own, so that the snapshots drawn above stay the ones they were.
	books := rand.New(rand.NewPCG(22, 2026))
	// Foreign pods (a pod not the operator's in a node's place: its node down) from a third.
	foreigner := rand.New(rand.NewPCG(35, 2026))
	disruptive := map[string]int{}
	upkeep := map[string]int{}
	for i := range snapshots {
		s := randomSnapshot(rng)
		if i%3 == 0 {
			s = perturbedFormed(rng)
		}
		randomBookkeeping(books, &s)
		randomForeign(foreigner, &s)
		for _, st := range []fsm.State{fsm.Bootstrapping, fsm.Forming, fsm.Active, fsm.Upgrading} {
			p := Pass(st, s)
			if p.Err != nil {
				t.Fatalf("snapshot %d, %s: %v\n%s", i, st, p.Err, dump(s))
			}
			n := 0
			for _, a := range p.Actions {
				if pod := retiredPod(a); pod != "" && slices.ContainsFunc(s.Pods, func(p fsm.Pod) bool { return p.Name == pod && p.Foreign != "" }) {
					t.Fatalf("snapshot %d, %s: %s, whose name a foreign pod holds\n%s", i, st, a, dump(s))
				}
				if Upkeep(a) {
					upkeep[fmt.Sprintf("%T", a)]++
				}
				if !a.Disruptive() {
					continue
				}
				n++
				disruptive[fmt.Sprintf("%T", a)]++
				if f, ok := a.(Failover); ok && f.Purpose == Roll {
					disruptive["roll"]++
				}
				if d, ok := a.(DeletePod); ok && d.Reason != "" {
					disruptive["retire"]++
				}
				checkSafe(t, i, st, s, a)
			}
			if n > 1 {
				t.Fatalf("snapshot %d, %s: %d disruptive actions: %v\n%s", i, st, n, p.Actions, dump(s))
			}
		}
	}
	// The generator must reach every disruptive kind, or the property says little.
	for _, kind := range []string{"plan.Forget", "plan.DeletePod", "plan.Takeover", "plan.FailoverForce", "plan.Failover", "roll", "retire", "plan.MoveSlots", "plan.CloseSlots"} {
		if disruptive[kind] == 0 {
			t.Errorf("no generated snapshot planned a %s: %v", kind, disruptive)
		}
	}
	for _, kind := range []string{"plan.SetBudget", "plan.DeleteBudget", "plan.WriteACLSecret", "plan.MarkActive", "plan.AnnotatePod"} {
		if upkeep[kind] == 0 {
			t.Errorf("no generated snapshot planned a %s: %v", kind, upkeep)
		}
	}
	t.Logf("disruptive actions planned: %v; bookkeeping: %v", disruptive, upkeep)
}

// randomForeign makes, now and then, a live pod a foreign one: a pod that is not the operator's
// holds its node's name, so its node is shown down (Running, silent, no IP).
func randomForeign(rng *rand.Rand, s *fsm.Snapshot) {
	for i := range s.Pods {
		if p := &s.Pods[i]; rng.IntN(8) == 0 && !p.Deleting && p.Phase == fsm.PodRunning {
			p.Foreign, p.IP, p.Ready = "another UID", "", false
			p.Node = &fsm.Node{Err: "not connected to"}
		}
	}
}

// retiredPod is the pod a retires or detaches on the way to retiring it, "" for other actions.
func retiredPod(a Action) string {
	if d, ok := a.(DeletePod); ok {
		return d.Pod
	}
	if d, ok := a.(Detach); ok {
		return d.Pod
	}
	return ""
}

// TestRunNeverRetiresAForeignNode: a step that would retire (or detach) a node whose name a pod
// that is not the operator's holds is held, whatever the planner, and later planners go on.
func TestRunNeverRetiresAForeignNode(t *testing.T) {
	s := fsm.Snapshot{Pods: []fsm.Pod{{Name: "x", Phase: fsm.PodRunning, Foreign: "another UID"}, {Name: "y", Phase: fsm.PodRunning}}}
	chain := Chain{
		fixed("a", "", Step{Actions: []Action{Detach{Pod: "x"}}, Wait: "shard 0: x served slots"}),
		fixed("b", "", Step{Actions: []Action{DeletePod{Pod: "x", Reason: RetireSurplus}}, Wait: "waiting for x to leave"}),
		fixed("c", "", Step{Actions: []Action{DeletePod{Pod: "y", Reason: RetireSurplus}}, Wait: "waiting for y to leave"}),
	}
	p := chain.Run(Input{State: fsm.Active, Snapshot: s})
	if !reflect.DeepEqual(p.Actions, []Action{DeletePod{Pod: "y", Reason: RetireSurplus}}) || p.Waiting != "waiting for y to leave" || len(p.Holds) != 2 ||
		!strings.Contains(p.Holds[0], "not retiring x") {
		t.Fatalf("actions %v, waiting %q, holds %q", p.Actions, p.Waiting, p.Holds)
	}
}

// randomBookkeeping draws what the bookkeeping planners read: budgets read or not (some
// missing, edited, or of removed shards), a stale ACL Secret, pods lacking annotations.
func randomBookkeeping(rng *rand.Rand, s *fsm.Snapshot) {
	s.BudgetsKnown = rng.IntN(4) > 0
	if s.BudgetsKnown {
		s.Budgets = map[int]fsm.Budget{}
		for shard := range s.Shards + 2 {
			if rng.IntN(4) > 0 {
				s.Budgets[shard] = fsm.Budget{MinAvailable: rng.IntN(4) - 1, AsBuilt: rng.IntN(5) > 0}
			}
		}
	}
	s.ACLSecretStale = rng.IntN(3) == 0
	for i := range s.Pods {
		if rng.IntN(4) == 0 {
			s.Pods[i].AnnotationsBehind = []string{"example.com/a"}
		}
	}
}

func checkSafe(t *testing.T, i int, st fsm.State, s fsm.Snapshot, a Action) {
	t.Helper()
	if f, ok := a.(Forget); ok {
		if s.OwnedIDs()[f.NodeID] {
			t.Fatalf("snapshot %d, %s: forgets %s, which a live pod owns\n%s", i, st, f.NodeID, dump(s))
		}
		if s.AllAnswer() != "" && !deadID(s, f.NodeID) {
			t.Fatalf("snapshot %d, %s: forgets %s while %s\n%s", i, st, f.NodeID, s.AllAnswer(), dump(s))
		}
		for _, p := range s.LivePods() {
			if n := p.Node; n != nil && n.Reachable && (len(n.Known[f.NodeID]) > 0 || (!n.Primary && n.PrimaryID == f.NodeID)) && !slices.Contains(f.Pods, p.Name) {
				t.Fatalf("snapshot %d, %s: forgets %s, which %s sees serve slots or follows\n%s", i, st, f.NodeID, p.Name, dump(s))
			}
		}
	}
	if m, ok := a.(MoveSlots); ok {
		if s.AllAnswer() != "" {
			t.Fatalf("snapshot %d, %s: %s while %s\n%s", i, st, a, s.AllAnswer(), dump(s))
		}
		for _, mv := range m.Moves {
			for _, name := range []string{mv.Source, mv.Target} {
				ok := false
				for _, p := range s.LivePods() {
					ok = ok || (p.Name == name && p.Node != nil && p.Node.Reachable && p.Node.Primary)
				}
				if !ok {
					t.Fatalf("snapshot %d, %s: %s involves %s, not a live reachable primary\n%s", i, st, a, name, dump(s))
				}
			}
		}
	}
	if d, ok := a.(DeletePod); ok && d.Reason != "" {
		for _, p := range s.Pods {
			if p.Name == d.Pod && p.Node != nil && p.Node.Reachable && len(p.Node.MySlots) > 0 {
				t.Fatalf("snapshot %d, %s: %s retires a primary that serves slots\n%s", i, st, a, dump(s))
			}
		}
	}
	if f, ok := a.(Failover); ok && f.Purpose == Roll {
		for _, p := range s.Pods {
			if p.Name == f.Pod && (p.SpecHash != s.SpecHash || p.Lifecycle != string(v1.LifecycleActive) || p.Node == nil || p.Node.PrimaryID != f.PrimaryID || !p.Node.LinkUp) {
				t.Fatalf("snapshot %d, %s: %s onto %s, not an up-to-date synced Active replica\n%s", i, st, a, f.Pod, dump(s))
			}
		}
		if in := s.Failover; in != nil && in.PrimaryID == f.PrimaryID && s.Now.Sub(in.StartedAt) < FailoverRetry {
			t.Fatalf("snapshot %d, %s: %s while a failover of %s issued %s ago is awaited\n%s", i, st, a, in.PrimaryID, s.Now.Sub(in.StartedAt), dump(s))
		}
		return
	}
	var promoted, lost string
	if f, ok := a.(FailoverForce); ok {
		promoted, lost = f.Pod, f.PrimaryID
	}
	if f, ok := a.(Failover); ok {
		promoted, lost = f.Pod, f.PrimaryID
	}
	if to, ok := a.(Takeover); ok && to.Reason != "" {
		// The failover planner's: the quorum planner's TAKEOVER ends a quorum loss, which no
		// FORCE awaited can.
		checkNotAwaited(t, i, st, s, a, to.PrimaryID)
	}
	if promoted != "" {
		for _, p := range s.Pods {
			if p.Name == promoted && (p.Node == nil || p.Node.ReplOffset <= 0 || p.Node.PrimaryID != lost || p.Lifecycle != string(v1.LifecycleActive)) {
				t.Fatalf("snapshot %d, %s: %s on %s, not a synced Active replica of %s\n%s", i, st, a, promoted, lost, dump(s))
			}
			live := !p.Deleting && p.Phase != fsm.PodFailed && p.Phase != fsm.PodSucceeded
			owns := p.LastNodeID == lost
			if p.Node != nil && p.Node.Reachable && p.Node.ID != "" {
				owns = p.Node.ID == lost
			}
			if live && owns {
				t.Fatalf("snapshot %d, %s: %s while live pod %s owns %s\n%s", i, st, a, p.Name, lost, dump(s))
			}
		}
		checkNotAwaited(t, i, st, s, a, lost)
	}
	if to, ok := a.(Takeover); ok {
		for _, p := range s.Pods {
			if p.Name == to.Pod && (p.Node == nil || p.Node.ReplOffset <= 0 || p.Node.PrimaryID != to.PrimaryID) {
				t.Fatalf("snapshot %d, %s: takeover on %s, not a synced replica of %s\n%s", i, st, to.Pod, to.PrimaryID, dump(s))
			}
		}
	}
}

// deadID reports whether id may be forgotten while some live node does not answer (the dead
// planner): a pod whose container is gone claims it, no live pod does, and no reachable live node
// sees it serve a slot or follows it.
func deadID(s fsm.Snapshot, id string) bool {
	dead := false
	for _, p := range s.Pods {
		if p.ClaimedID() == id && (p.Phase == fsm.PodFailed || p.Exited) {
			dead = true
		}
	}
	for _, p := range s.LivePods() {
		if p.ClaimedID() == id {
			return false
		}
		if n := p.Node; n != nil && n.Reachable && (len(n.Known[id]) > 0 || (!n.Primary && n.PrimaryID == id) || n.Follows[id] != "") {
			return false
		}
	}
	return dead
}

// checkNotAwaited fails unless a, which promotes a replica of lost, may overtake the failover of
// lost that status.failover records (plan/failover.go rule 3): only when none younger than
// FailoverRetry is recorded, when its replica's pod is no longer live, when it was graceful and
// lost's container is gone since, or when a is the TAKEOVER answering a FORCE that did not take.
func checkNotAwaited(t *testing.T, i int, st fsm.State, s fsm.Snapshot, a Action, lost string) {
	t.Helper()
	f := s.Failover
	if f == nil || f.PrimaryID != lost || s.Now.Sub(f.StartedAt) >= FailoverRetry {
		return
	}
	if c := s.Pod(f.Pod); c == nil || !isLive(*c) {
		return
	}
	owner, known := ownerOf(s, lost)
	gone := known && (owner == nil || owner.Phase == fsm.PodFailed || owner.Exited)
	if !f.Force && !f.Takeover && gone {
		return
	}
	if to, ok := a.(Takeover); ok && to.Reason == TakeoverForceRefused && f.Force && s.Now.Sub(f.StartedAt) >= forceUnlanded {
		return
	}
	t.Fatalf("snapshot %d, %s: %s while a failover of %s issued %s ago is awaited\n%s", i, st, a, lost, s.Now.Sub(f.StartedAt), dump(s))
}

// randomSnapshot draws a cluster of 1-4 shards × 0-2 replicas in any condition: each pod may be
// missing, pending, failed, deleting, running unreachable, or running with a node whose view of
// the cluster is drawn from a small pool of ids (some of them gone), with random slots, roles,
// `fail`/`fail?` flags, links and offsets.
func randomSnapshot(rng *rand.Rand) fsm.Snapshot {
	s := fsm.Snapshot{Shards: 1 + rng.IntN(4), ReplicasPerShard: rng.IntN(3), SpecHash: "h"}
	pool := []string{"id-a", "id-b", "id-c", "id-d", "id-e", "id-f", "id-g", "id-h", "id-x", "id-y"}
	spread := slot.EvenSpread(s.Shards)
	randomSlots := func() slot.Set {
		switch rng.IntN(4) {
		case 0:
			return slot.Set{spread[rng.IntN(len(spread))]}
		case 1:
			a := rng.IntN(slot.Count)
			return slot.Set{{Start: a, End: min(slot.Count-1, a+rng.IntN(2000))}}
		default:
			return nil
		}
	}
	n := 0
	for sh := range s.Shards {
		if rng.IntN(8) == 0 {
			continue // a missing shard
		}
		for range rng.IntN(s.ReplicasPerShard + 3) {
			n++
			p := fsm.Pod{Name: fmt.Sprintf("p%d-%d", sh, n), Shard: sh, Phase: fsm.PodRunning, IP: fmt.Sprintf("10.0.%d.%d", sh, n), SpecHash: "h"}
			p.Lifecycle = []string{"", string(v1.LifecycleJoining), string(v1.LifecycleActive), string(v1.LifecycleActive)}[rng.IntN(4)]
			if rng.IntN(2) == 0 {
				p.LastNodeID = pool[rng.IntN(len(pool))]
			}
			switch rng.IntN(11) {
			case 0:
				p.Phase, p.IP = fsm.PodPending, ""
			case 1:
				p.Phase, p.StartFailure, p.Failure, p.Exited = fsm.PodFailed, rng.IntN(2) == 0, "Error, exit code 1", true
				p.Node = &fsm.Node{Err: "connection refused"}
			case 2:
				p.Deleting = true
				p.Exited = rng.IntN(2) == 0
			case 3:
				p.Node = &fsm.Node{Err: "i/o timeout"}
			case 4:
				p.Phase = fsm.PodUnknown
			case 5:
				p.Deleting = true // still running: its node answers
			}
			if p.Phase == fsm.PodRunning && p.Node == nil && !p.Exited && (!p.Deleting || rng.IntN(2) == 0) {
				p.Node = randomNode(rng, pool, randomSlots)
			}
			s.Pods = append(s.Pods, p)
		}
	}
	// Node ids are unique per live pod: a repeat draw becomes an unreachable node.
	seen := map[string]bool{}
	for i := range s.Pods {
		if nd := s.Pods[i].Node; nd != nil && nd.ID != "" {
			if seen[nd.ID] {
				s.Pods[i].Node = &fsm.Node{Err: "duplicate"}
			}
			seen[nd.ID] = true
		}
	}
	for i := range s.Pods {
		if nd := s.Pods[i].Node; nd != nil && nd.Reachable && rng.IntN(2) == 0 {
			nd.ClusterStateOK, nd.SlotsAssigned = true, slot.Count
		}
	}
	randomIntent(rng, &s, pool)
	sortPods(s.Pods)
	return s
}

// randomIntent may record a failover issued some time ago (status.failover), fresh or stale,
// for one of the ids in pool.
func randomIntent(rng *rand.Rand, s *fsm.Snapshot, pool []string) {
	s.Now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if rng.IntN(3) == 0 {
		mode := rng.IntN(3) // graceful, FORCE, TAKEOVER
		s.Failover = &fsm.FailoverIntent{Shard: rng.IntN(max(s.Shards, 1)), Pod: "p0-1", PrimaryID: pool[rng.IntN(len(pool))],
			Force: mode == 1, Takeover: mode == 2, StartedAt: s.Now.Add(-time.Duration(rng.IntN(20)) * time.Second)}
	}
}

// perturbedFormed starts from a formed, synced cluster and breaks some of it: dead pods left
// behind (Failed, deleting), pods lost or cut off, ids flagged `fail` or `fail?`, stale ids, lost
// offsets. It reaches the states in which cleanup and quorum act.
func perturbedFormed(rng *rand.Rand) fsm.Snapshot {
	s := newSnapshot(fsm.Active, 1+rng.IntN(4), rng.IntN(3), formed)
	// A spec change or a replica scale-down under way: some nodes of an older spec, fewer
	// replicas wanted than there are.
	s.SpecHash = "h"
	for i := range s.Pods {
		s.Pods[i].SpecHash = []string{"h", "h", "old"}[rng.IntN(3)]
	}
	if s.ReplicasPerShard > 0 && rng.IntN(4) == 0 {
		s.ReplicasPerShard--
	}
	// A shard count change, and a move left open.
	switch rng.IntN(6) {
	case 0:
		s.Shards++
	case 1:
		if s.Shards > 1 {
			s.Shards--
		}
	case 2:
		if n := s.Pods[rng.IntN(len(s.Pods))].Node; n.Primary {
			n.Migrating = map[int]string{rng.IntN(slot.Count): "id-p0-0"}
		}
	case 3:
		if n := s.Pods[rng.IntN(len(s.Pods))].Node; n.Primary {
			n.Importing = map[int]string{rng.IntN(slot.Count): "id-p1-0"}
		}
	}
	var opts []opt
	var ids []string
	for _, p := range s.Pods {
		ids = append(ids, p.Node.ID)
		switch rng.IntN(13) {
		case 8:
			opts = append(opts, withGone(p.Name))
		case 9:
			opts = append(opts, withDeleting(p.Name, rng.IntN(2) == 0))
		case 10:
			opts = append(opts, withLifecycle(p.Name, v1.LifecycleJoining))
		case 11:
			opts = append(opts, withPod(p.Name, func(p *fsm.Pod) { p.LastNodeID = "" }))
		case 0:
			opts = append(opts, withFailed(p.Name))
		case 1:
			opts = append(opts, withCut(p.Name))
		case 2:
			opts = append(opts, withFailFlag(p.Node.ID))
		case 3:
			opts = append(opts, withSuspectFlag(p.Node.ID))
		case 4:
			opts = append(opts, withOffsets(map[string]int64{p.Name: 0}))
		}
	}
	for _, o := range opts {
		o(&s)
	}
	randomIntent(rng, &s, ids)
	for range rng.IntN(3) { // dead pods of earlier incarnations
		s.Pods = append(s.Pods, fsm.Pod{Name: fmt.Sprintf("p%d-dead%d", rng.IntN(s.Shards), rng.IntN(100)), Shard: rng.IntN(s.Shards), Phase: fsm.PodFailed})
	}
	if rng.IntN(2) == 0 { // a stale id every node flags failed
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Reachable {
				n.Known["id-stale"] = nil
				if n.Failed == nil {
					n.Failed = map[string]bool{}
				}
				n.Failed["id-stale"] = true
			}
		}
	}
	sortPods(s.Pods)
	return s
}

func randomNode(rng *rand.Rand, pool []string, randomSlots func() slot.Set) *fsm.Node {
	nd := &fsm.Node{Reachable: true, ID: pool[rng.IntN(len(pool))], Known: map[string]slot.Set{}, Failed: map[string]bool{}, Suspected: map[string]bool{}}
	nd.Known[nd.ID] = nil
	if rng.IntN(2) == 0 {
		nd.Primary = true
		nd.MySlots = randomSlots()
		nd.Known[nd.ID] = nd.MySlots
	} else {
		nd.PrimaryID = pool[rng.IntN(len(pool))]
		nd.LinkUp = rng.IntN(2) == 0
		nd.ReplOffset = int64(rng.IntN(3) * 100)
	}
	for _, id := range pool {
		if id == nd.ID || rng.IntN(3) == 0 {
			continue
		}
		nd.Known[id] = randomSlots()
		switch rng.IntN(4) {
		case 0:
			nd.Failed[id] = true
		case 1:
			nd.Suspected[id] = true
		}
	}
	return nd
}

func sortPods(pods []fsm.Pod) {
	for i := 1; i < len(pods); i++ {
		for j := i; j > 0 && pods[j].Name < pods[j-1].Name; j-- {
			pods[j], pods[j-1] = pods[j-1], pods[j]
		}
	}
}

func dump(s fsm.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d×%d\n", s.Shards, s.ReplicasPerShard)
	for _, p := range s.Pods {
		fmt.Fprintf(&b, "  %s shard %d %s deleting=%v exited=%v lifecycle=%s last=%s node=%+v\n", p.Name, p.Shard, p.Phase, p.Deleting, p.Exited, p.Lifecycle, p.LastNodeID, p.Node)
	}
	if s.Failover != nil {
		fmt.Fprintf(&b, "  failover %+v (now %s)\n", *s.Failover, s.Now)
	}
	return b.String()
}
