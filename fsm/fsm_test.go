package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	legal := map[State][]Event{
		Bootstrapping: {EventForm, EventActivate, EventInvalidate},
		Forming:       {EventActivate, EventInvalidate},
		Active:        {EventUpgrade, EventInvalidate},
		Upgrading:     {EventActivate, EventInvalidate},
		Invalid:       {EventBootstrap, EventForm, EventActivate, EventUpgrade},
	}
	all := []Event{EventBootstrap, EventForm, EventActivate, EventUpgrade, EventInvalidate}
	for from, ok := range legal {
		for _, e := range all {
			m := New(from)
			got, err := m.Fire(e)
			allowed := contains(ok, e)
			switch {
			case allowed && (err != nil || got != Target(e)):
				t.Errorf("%s --%s--> got %s, %v; want %s", from, e, got, err, Target(e))
			case !allowed && Target(e) == from && err != nil:
				t.Errorf("%s --%s--> self-transition must not be an error: %v", from, e, err)
			case !allowed && Target(e) != from && !errors.Is(err, ErrIllegalTransition):
				t.Errorf("%s --%s--> want ErrIllegalTransition, got %s, %v", from, e, got, err)
			}
		}
	}
}

func contains(es []Event, e Event) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

func TestInitialOnlyBootstrapsOrInvalidates(t *testing.T) {
	for _, e := range []Event{EventForm, EventActivate, EventUpgrade} {
		if _, err := New(Initial).Fire(e); !errors.Is(err, ErrIllegalTransition) {
			t.Errorf("Initial --%s--> %v", e, err)
		}
	}
	for _, e := range []Event{EventBootstrap, EventInvalidate} {
		if got, err := New(Initial).Fire(e); err != nil || got != Target(e) {
			t.Errorf("Initial --%s--> %s, %v", e, got, err)
		}
	}
}

func TestEvenSlotSpread(t *testing.T) {
	for n := 1; n <= 40; n++ {
		rs := EvenSlotSpread(n)
		if len(rs) != n || rs[0].Start != 0 || rs[n-1].End != TotalSlots-1 {
			t.Fatalf("n=%d: %v", n, rs)
		}
		lo, hi := TotalSlots, 0
		for i, r := range rs {
			if i > 0 && r.Start != rs[i-1].End+1 {
				t.Fatalf("n=%d: gap at %d", n, i)
			}
			lo, hi = min(lo, r.Len()), max(hi, r.Len())
		}
		if hi-lo > 1 {
			t.Fatalf("n=%d: sizes %d..%d", n, lo, hi)
		}
	}
	if got := EvenSlotSpread(3); !reflect.DeepEqual(got, []SlotRange{{0, 5461}, {5462, 10922}, {10923, 16383}}) {
		t.Fatalf("3 shards: %v", got)
	}
}

// cluster builds a snapshot of shards×(replicas+1) running pods named p<shard>-<i>.
type opt func(*Snapshot)

func newSnapshot(state State, shards, replicas int, opts ...opt) Snapshot {
	s := Snapshot{State: state, Shards: shards, ReplicasPerShard: replicas}
	for sh := range shards {
		for i := range replicas + 1 {
			name := fmt.Sprintf("p%d-%d", sh, i)
			s.Pods = append(s.Pods, Pod{Name: name, Shard: sh, Phase: PodRunning, IP: fmt.Sprintf("10.244.%d.%d", sh, i+2), Ready: true,
				Node: &Node{Reachable: true, ID: "id-" + name, Primary: true, Known: map[string][]SlotRange{"id-" + name: nil}}})
		}
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// meshed: every node knows every node.
func meshed(s *Snapshot) {
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = nil
		}
	}
}

// formed: meshed, slots spread over the first pod of each shard, others replicate it, ok.
func formed(s *Snapshot) {
	meshed(s)
	spread := EvenSlotSpread(s.Shards)
	for i := range s.Pods {
		p := &s.Pods[i]
		primary := fmt.Sprintf("id-p%d-0", p.Shard)
		if p.Node.ID == primary {
			p.Node.MySlots = []SlotRange{spread[p.Shard]}
		} else {
			p.Node.Primary, p.Node.PrimaryID, p.Node.LinkUp = false, primary, true
		}
		p.Node.ClusterStateOK, p.Node.SlotsAssigned = true, TotalSlots
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
}

func withProblem(msg string) opt { return func(s *Snapshot) { s.SpecProblem = msg } }
func withoutPods(s *Snapshot)    { s.Pods = nil }
func withPending(name string) opt {
	return func(s *Snapshot) {
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				s.Pods[i].Phase, s.Pods[i].IP, s.Pods[i].Node = PodPending, "", nil
			}
		}
	}
}
func withFailed(name string) opt {
	return func(s *Snapshot) {
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				s.Pods[i].Phase = PodFailed
				s.Pods[i].Node = &Node{Reachable: false, Err: "connection refused"}
			}
		}
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		s    Snapshot
		want Event
	}{
		{"new cluster bootstraps", newSnapshot(Initial, 3, 1, withoutPods), EventBootstrap},
		{"new cluster with a bad reference is invalid", newSnapshot(Initial, 3, 1, withoutPods, withProblem("x")), EventInvalidate},
		{"bootstrapping without pods stays", newSnapshot(Bootstrapping, 3, 1, withoutPods), ""},
		{"pods pending stay bootstrapping", newSnapshot(Bootstrapping, 3, 1, withPending("p1-1")), ""},
		{"all pods up: form", newSnapshot(Bootstrapping, 3, 1), EventForm},
		{"forming, not yet agreed", newSnapshot(Forming, 3, 1, meshed), ""},
		{"forming with a lost pod stays forming", newSnapshot(Forming, 3, 1, withFailed("p0-1")), ""},
		{"formed: activate", newSnapshot(Forming, 3, 1, formed), EventActivate},
		{"restarted after forming, status lost: activate", newSnapshot(Bootstrapping, 3, 1, formed), EventActivate},
		{"active stays active when a pod fails", newSnapshot(Active, 3, 1, formed, withFailed("p2-1")), ""},
		{"spec problem invalidates", newSnapshot(Active, 3, 1, formed, withProblem("ValkeyConfig \"x\" not found")), EventInvalidate},
		{"invalid stays invalid while the problem lasts", newSnapshot(Invalid, 3, 1, withProblem("x")), ""},
		{"invalid before any pod: bootstrap", newSnapshot(Invalid, 3, 1, withoutPods), EventBootstrap},
		{"invalid, serving cluster: activate", newSnapshot(Invalid, 3, 1, formed, withFailed("p1-1")), EventActivate},
		{"invalid, pods up, unformed: form", newSnapshot(Invalid, 1, 0), EventForm},
		{"single node 1x0 formed", newSnapshot(Forming, 1, 0, formed), EventActivate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.s)
			if d.Event != c.want {
				t.Fatalf("Decide = %q (%s), want %q", d.Event, d.Reason, c.want)
			}
			if d.Event == "" {
				return
			}
			// Deciding again on the same snapshot after the transition yields no event.
			m := New(c.s.State)
			next, err := m.Fire(d.Event)
			if err != nil {
				t.Fatalf("Fire(%s): %v", d.Event, err)
			}
			again := c.s
			again.State = next
			if d2 := Decide(again); d2.Event != "" {
				t.Fatalf("second decision on the same snapshot: %q (%s)", d2.Event, d2.Reason)
			}
		})
	}
}

func kinds(p Plan) []ActionKind {
	var out []ActionKind
	for _, a := range p.Actions {
		out = append(out, a.Kind)
	}
	return out
}

func TestPlanPass(t *testing.T) {
	t.Run("invalid plans nothing", func(t *testing.T) {
		if p := PlanPass(Invalid, newSnapshot(Invalid, 3, 1, withoutPods)); len(p.Actions) != 0 {
			t.Fatal(p.Actions)
		}
	})
	t.Run("bootstrap creates every pod", func(t *testing.T) {
		p := PlanPass(Bootstrapping, newSnapshot(Bootstrapping, 3, 1, withoutPods))
		if len(p.Actions) != 6 || p.Actions[0].Kind != ActCreatePod || p.Actions[5].Shard != 2 {
			t.Fatal(p.Actions)
		}
	})
	t.Run("forming meets every node from the seed", func(t *testing.T) {
		p := PlanPass(Forming, newSnapshot(Forming, 3, 1))
		if len(p.Actions) != 5 {
			t.Fatal(p.Actions)
		}
		for _, a := range p.Actions {
			if a.Kind != ActMeet || a.Pod != "p0-0" {
				t.Fatal(a)
			}
		}
	})
	t.Run("seed knows all: nodes meet the ones they miss", func(t *testing.T) {
		s := newSnapshot(Forming, 3, 1, meshed)
		delete(s.Pods[2].Node.Known, "id-p2-1") // p1-0 has not heard of p2-1 yet
		p := PlanPass(Forming, s)
		if !reflect.DeepEqual(p.Actions, []Action{{Kind: ActMeet, Pod: "p1-0", IP: s.Pods[5].IP, NodeID: "id-p2-1"}}) {
			t.Fatal(p.Actions)
		}
	})
	t.Run("meshed: slots to one pod per shard", func(t *testing.T) {
		p := PlanPass(Forming, newSnapshot(Forming, 3, 1, meshed))
		want := []Action{
			{Kind: ActAddSlots, Pod: "p0-0", Slots: []SlotRange{{0, 5461}}},
			{Kind: ActAddSlots, Pod: "p1-0", Slots: []SlotRange{{5462, 10922}}},
			{Kind: ActAddSlots, Pod: "p2-0", Slots: []SlotRange{{10923, 16383}}},
		}
		if !reflect.DeepEqual(p.Actions, want) {
			t.Fatalf("%v", p.Actions)
		}
	})
	t.Run("restart mid-assignment never assigns a slot twice", func(t *testing.T) {
		s := newSnapshot(Forming, 3, 1, meshed)
		// p1-0 got its slots, but only p1-0 itself knows yet; p0-0 claimed part of its range on
		// another node's view (a stale gossip of an earlier attempt).
		s.Pods[2].Node.MySlots = []SlotRange{{5462, 10922}}
		s.Pods[2].Node.Known["id-p1-0"] = []SlotRange{{5462, 10922}}
		s.Pods[4].Node.Known["id-p0-0"] = []SlotRange{{0, 99}}
		p := PlanPass(Forming, s)
		want := []Action{
			{Kind: ActAddSlots, Pod: "p0-0", Slots: []SlotRange{{100, 5461}}},
			{Kind: ActAddSlots, Pod: "p2-0", Slots: []SlotRange{{10923, 16383}}},
		}
		if !reflect.DeepEqual(p.Actions, want) {
			t.Fatalf("%v", p.Actions)
		}
	})
	t.Run("slots held: replicas attach", func(t *testing.T) {
		s := newSnapshot(Forming, 2, 2, meshed)
		spread := EvenSlotSpread(2)
		for i := range s.Pods {
			if s.Pods[i].Name == "p0-0" || s.Pods[i].Name == "p1-0" {
				s.Pods[i].Node.MySlots = []SlotRange{spread[s.Pods[i].Shard]}
			}
		}
		p := PlanPass(Forming, s)
		if !reflect.DeepEqual(kinds(p), []ActionKind{ActReplicate, ActReplicate, ActReplicate, ActReplicate}) {
			t.Fatal(p.Actions)
		}
		if p.Actions[0].Pod != "p0-1" || p.Actions[0].PrimaryID != "id-p0-0" || p.Actions[3].PrimaryID != "id-p1-0" {
			t.Fatal(p.Actions)
		}
	})
	t.Run("formed cluster plans nothing", func(t *testing.T) {
		for _, st := range []State{Forming, Active} {
			if p := PlanPass(st, newSnapshot(st, 3, 1, formed)); len(p.Actions) != 0 || p.Waiting != "" {
				t.Fatalf("%s: %v %q", st, p.Actions, p.Waiting)
			}
		}
	})
	t.Run("unreachable node: wait, no valkey step", func(t *testing.T) {
		s := newSnapshot(Forming, 3, 1)
		s.Pods[3].Node = &Node{Reachable: false, Err: "timeout"}
		p := PlanPass(Forming, s)
		if len(p.Actions) != 0 || p.Waiting == "" {
			t.Fatal(p)
		}
	})
	t.Run("active heal: replace failed pod, then forget and delete", func(t *testing.T) {
		s := newSnapshot(Active, 3, 1, formed, withFailed("p1-1"))
		p := PlanPass(Active, s)
		// Until the nodes agree it failed, the dead replica is not forgotten.
		if !reflect.DeepEqual(kinds(p), []ActionKind{ActCreatePod}) || p.Actions[0].Shard != 1 {
			t.Fatal(p.Actions)
		}
		// The replacement runs and has joined as a replica of p1-0; the dead id is still known.
		s = newSnapshot(Active, 3, 1, formed)
		s.Pods[3].Name, s.Pods[3].Node.ID = "p1-9", "id-p1-9"
		for i := range s.Pods {
			s.Pods[i].Node.Known["id-p1-9"] = nil
			s.Pods[i].Node.Failed = map[string]bool{"id-p1-1": true}
		}
		s.Pods = append(s.Pods, Pod{Name: "p1-1", Shard: 1, Phase: PodFailed})
		p = PlanPass(Active, s)
		if !reflect.DeepEqual(kinds(p), []ActionKind{ActForget, ActForget, ActForget, ActForget, ActForget, ActForget}) || p.Actions[0].NodeID != "id-p1-1" {
			t.Fatal(p.Actions)
		}
		for i := range s.Pods {
			if s.Pods[i].Node != nil {
				delete(s.Pods[i].Node.Known, "id-p1-1")
			}
		}
		p = PlanPass(Active, s)
		if !reflect.DeepEqual(p.Actions, []Action{{Kind: ActDeletePod, Pod: "p1-1"}}) {
			t.Fatal(p.Actions)
		}
	})
}

func TestAwaitingFailover(t *testing.T) {
	s := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"))
	got := s.AwaitingFailover()
	if !reflect.DeepEqual(got, []FailoverWait{{Shard: 1, Replica: "p1-1", PrimaryID: "id-p1-0"}}) {
		t.Fatalf("%+v", got)
	}
	if got := newSnapshot(Active, 3, 1, formed, withFailed("p1-1")).AwaitingFailover(); len(got) != 0 {
		t.Fatalf("a lost replica is not a failover: %+v", got)
	}
}

// withFailFlag makes every live node's view flag id as failed.
func withFailFlag(id string) opt {
	return func(s *Snapshot) {
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Reachable {
				n.Failed = map[string]bool{id: true}
			}
		}
	}
}

// A dead primary with a live replica is never forgotten, even when the node that happens to
// be first by name (a fresh replacement) sees it without slots: that was a whole-cluster outage.
func TestNoForgetOfAPrimaryAReplicaStillFollows(t *testing.T) {
	s := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"), withFailFlag("id-p1-0"))
	// The replacement "a-new" sorts first; it learnt the dead primary from gossip, slot-less.
	s.Pods = append(s.Pods, Pod{Name: "a-new", Shard: 1, Phase: PodRunning, IP: "10.244.9.9",
		Node: &Node{Reachable: true, ID: "id-new", Primary: true, Known: map[string][]SlotRange{}, Failed: map[string]bool{"id-p1-0": true}}})
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			for j := range s.Pods {
				if m := s.Pods[j].Node; m != nil && m.ID != "" {
					if _, ok := n.Known[m.ID]; !ok {
						n.Known[m.ID] = nil
					}
				}
			}
			n.Known["id-new"] = nil
		}
	}
	s.Pods[len(s.Pods)-1].Node.Known["id-p1-0"] = nil
	for _, a := range PlanPass(Active, s).Actions {
		if a.Kind == ActForget || a.Kind == ActAddSlots {
			t.Fatalf("planned %s while p1-1 still follows the dead primary", a)
		}
	}
}

// A shard that lost its only node is served again, empty: its dead primary is forgotten once
// every node flags it failed, and its slots go to the replacement.
func TestLostSoleNodeShardIsServedAgain(t *testing.T) {
	s := newSnapshot(Active, 3, 0, formed, withFailed("p1-0"), withFailFlag("id-p1-0"))
	s.Pods = append(s.Pods, Pod{Name: "p1-9", Shard: 1, Phase: PodRunning, IP: "10.244.9.9",
		Node: &Node{Reachable: true, ID: "id-p1-9", Primary: true, Known: map[string][]SlotRange{}, Failed: map[string]bool{"id-p1-0": true}}})
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			for j := range s.Pods {
				if m := s.Pods[j].Node; m != nil && m.ID != "" {
					n.Known[m.ID] = m.MySlots
				}
			}
			n.Known["id-p1-0"] = EvenSlotSpread(3)[1:2]
		}
	}
	p := PlanPass(Active, s)
	if len(p.Actions) == 0 || p.Actions[0].Kind != ActForget || p.Actions[0].NodeID != "id-p1-0" {
		t.Fatalf("want forget of the dead sole primary, got %v", p.Actions)
	}
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			delete(n.Known, "id-p1-0")
		}
	}
	p = PlanPass(Active, s)
	if !reflect.DeepEqual(p.Actions, []Action{{Kind: ActAddSlots, Pod: "p1-9", Slots: EvenSlotSpread(3)[1:2]}}) {
		t.Fatalf("want the shard's slots on the replacement, got %v", p.Actions)
	}
}

// Pods that fail on start are not replaced without end.
func TestCrashingPodsStopReplacement(t *testing.T) {
	s := newSnapshot(Bootstrapping, 1, 0, withoutPods)
	s.SpecHash = "h1"
	for _, name := range []string{"p0-a", "p0-b"} {
		s.Pods = append(s.Pods, Pod{Name: name, Shard: 0, Phase: PodFailed, SpecHash: "h1", Failure: "Error, exit code 1", StartFailure: true})
	}
	p := PlanPass(Bootstrapping, s)
	if len(p.Actions) != 0 || !strings.Contains(p.Blocked, "p0-a, p0-b failed on start (Error, exit code 1)") {
		t.Fatalf("%v %q", p.Actions, p.Blocked)
	}
	s.SpecHash = "h2" // the config was fixed
	if p := PlanPass(Bootstrapping, s); len(p.Actions) != 1 || p.Blocked != "" {
		t.Fatalf("after a spec change: %v %q", p.Actions, p.Blocked)
	}
	// Nodes killed by a signal (a lost shard) are not start failures: replace them.
	killed := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"), withFailed("p1-1"))
	for i := range killed.Pods {
		killed.Pods[i].SpecHash = killed.SpecHash
	}
	if p := PlanPass(Active, killed); p.Blocked != "" || len(p.Actions) < 2 || p.Actions[0].Kind != ActCreatePod {
		t.Fatalf("lost shard: %v %q", p.Actions, p.Blocked)
	}
	// At most MaxFailedPerShard pods of one spec are tried in a shard, even when more are missing.
	two := newSnapshot(Bootstrapping, 1, 4, withoutPods)
	two.Pods = append(two.Pods, Pod{Name: "x", Shard: 0, Phase: PodFailed, StartFailure: true})
	if p := PlanPass(Bootstrapping, two); len(p.Actions) != MaxFailedPerShard-1 {
		t.Fatalf("want %d creations, got %v", MaxFailedPerShard-1, p.Actions)
	}
}

// withReplOffsets sets replication offsets by pod name.
func withOffsets(offsets map[string]int64) opt {
	return func(s *Snapshot) {
		for i := range s.Pods {
			if o, ok := offsets[s.Pods[i].Name]; ok && s.Pods[i].Node != nil {
				s.Pods[i].Node.ReplOffset = o
			}
		}
	}
}

// Without a majority of slot-holding primaries Valkey cannot elect: TAKEOVER on the most
// up-to-date replica. With a majority, wait for Valkey's own failover.
func TestTakeoverOnlyWithoutQuorum(t *testing.T) {
	s := newSnapshot(Active, 1, 2, formed, withFailed("p0-0"), withFailFlag("id-p0-0"), withOffsets(map[string]int64{"p0-1": 10, "p0-2": 30}))
	p := PlanPass(Active, s)
	if !reflect.DeepEqual(p.Actions, []Action{{Kind: ActCreatePod}, {Kind: ActTakeover, Pod: "p0-2", NodeID: "id-p0-0", Shard: 0}}) {
		t.Fatalf("1x2 lost its primary: %v", p.Actions)
	}
	s = newSnapshot(Active, 2, 1, formed, withFailed("p0-0"))
	if p := PlanPass(Active, s); len(p.Actions) != 2 || p.Actions[1].Kind != ActTakeover {
		t.Fatalf("2x1: one of two primaries is no majority: %v", p.Actions)
	}
	s = newSnapshot(Active, 3, 1, formed, withFailed("p0-0"))
	for _, a := range PlanPass(Active, s).Actions {
		if a.Kind == ActTakeover {
			t.Fatalf("3x1 with two primaries alive must wait for Valkey's failover: %v", a)
		}
	}
}
