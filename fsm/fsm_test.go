package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
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

// cluster builds a snapshot of shards×(replicas+1) running pods named p<shard>-<i>.
type opt func(*Snapshot)

func newSnapshot(state State, shards, replicas int, opts ...opt) Snapshot {
	s := Snapshot{State: state, Shards: shards, ReplicasPerShard: replicas}
	for sh := range shards {
		for i := range replicas + 1 {
			name := fmt.Sprintf("p%d-%d", sh, i)
			s.Pods = append(s.Pods, Pod{Name: name, Shard: sh, Phase: PodRunning, IP: fmt.Sprintf("10.244.%d.%d", sh, i+2), Ready: true,
				Node: &Node{Reachable: true, ID: "id-" + name, Primary: true, Known: map[string]slot.Set{"id-" + name: nil}}})
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
	spread := slot.EvenSpread(s.Shards)
	for i := range s.Pods {
		p := &s.Pods[i]
		primary := fmt.Sprintf("id-p%d-0", p.Shard)
		if p.Node.ID == primary {
			p.Node.MySlots = slot.Set{spread[p.Shard]}
		} else {
			p.Node.Primary, p.Node.PrimaryID, p.Node.LinkUp, p.Node.ReplOffset = false, primary, true, 1000
		}
		p.Node.ClusterStateOK, p.Node.SlotsAssigned = true, slot.Count
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
}

func withProblem(msg string) opt { return func(s *Snapshot) { s.SpecProblem = msg } }
func withoutPods(s *Snapshot)    { s.Pods = nil }

// withSpec: the spec now resolves to hash; the pods were built from another.
func withSpec(hash string) opt {
	return func(s *Snapshot) {
		s.SpecHash = hash
		for i := range s.Pods {
			s.Pods[i].SpecHash = "old"
		}
	}
}

func withReplicas(n int) opt { return func(s *Snapshot) { s.ReplicasPerShard = n } }
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

// withReplacement: a new pod of shard runs, an empty primary that knows only itself.
func withReplacement(shard int) opt {
	return func(s *Snapshot) {
		name := fmt.Sprintf("p%d-new", shard)
		s.Pods = append(s.Pods, Pod{Name: name, Shard: shard, Phase: PodRunning, IP: "10.244.9.9",
			Node: &Node{Reachable: true, ID: "id-" + name, Primary: true, Known: map[string]slot.Set{"id-" + name: nil}}})
	}
}

// formedOnce: status.formedAt is set.
func formedOnce(s *Snapshot) { s.FormedAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) }

// allFailed: every pod's container is gone (killed), its node unreachable.
func allFailed(s *Snapshot) {
	for i := range s.Pods {
		s.Pods[i].Phase = PodFailed
		s.Pods[i].Exited = true
		s.Pods[i].Node = &Node{Reachable: false, Err: "connection refused"}
	}
}

// notServing: no node says cluster_state:ok (a shard's slots have no live owner).
func notServing(s *Snapshot) {
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil {
			n.ClusterStateOK = false
		}
	}
}

// joined: the named pod's ValkeyNode completed its join (lifecycle Active).
func joined(name string) opt {
	return func(s *Snapshot) {
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				s.Pods[i].Lifecycle = string(v1.LifecycleActive)
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
		{"active with nodes of an older spec: upgrade", newSnapshot(Active, 3, 1, formed, withSpec("new")), EventUpgrade},
		{"active, replicas scaled down: upgrade", newSnapshot(Active, 3, 1, formed, withReplicas(0)), EventUpgrade},
		{"active, replicas scaled up: upgrade", newSnapshot(Active, 3, 1, formed, withReplicas(2)), EventUpgrade},
		{"upgrading, still outdated: stays", newSnapshot(Upgrading, 3, 1, formed, withSpec("new")), ""},
		{"upgrading, done and formed: activate", newSnapshot(Upgrading, 3, 1, formed), EventActivate},
		{"upgrading, done, a retired id not yet forgotten: stays", newSnapshot(Upgrading, 3, 1, formed, withFailed("p2-1")), ""},
		// A cluster formed once (status.formedAt) is healed in place, never bootstrapped again,
		// whatever it lost while Invalid: the break test.
		{"invalid, formed once, every pod dead: activate, no bootstrap", newSnapshot(Invalid, 3, 1, formed, formedOnce, allFailed), EventActivate},
		{"invalid, formed once, replacements up but not yet met: activate, no forming", newSnapshot(Invalid, 3, 1, formedOnce), EventActivate},
		{"invalid, formed once, one shard dead, not serving: activate", newSnapshot(Invalid, 3, 1, formed, formedOnce, withFailed("p1-0"), withFailed("p1-1"), notServing), EventActivate},
		{"invalid, formed once, still serving: activate", newSnapshot(Invalid, 3, 1, formed, formedOnce), EventActivate},
		{"invalid, formed once, replicas scaled meanwhile: upgrade", newSnapshot(Invalid, 3, 1, formed, formedOnce, withReplicas(2)), EventUpgrade},
		{"invalid, formed once, problem still there: stays", newSnapshot(Invalid, 3, 1, formedOnce, allFailed, withProblem("x")), ""},
		{"invalid, status before formedAt, a node had joined, every pod dead: activate", newSnapshot(Invalid, 3, 1, formed, joined("p0-1"), allFailed), EventActivate},
		{"invalid, never formed, every pod dead: bootstrap", newSnapshot(Invalid, 3, 1, allFailed), EventBootstrap},
		{"bootstrapping with the marker (an older operator's status): activate", newSnapshot(Bootstrapping, 3, 1, formedOnce, allFailed), EventActivate},
		{"forming with the marker: activate", newSnapshot(Forming, 3, 1, formedOnce, meshed), EventActivate},
		{"active, formed once, every pod dead: stays active", newSnapshot(Active, 3, 1, formed, formedOnce, allFailed), ""},
		// Chaos seed 60606: a lost primary's replacement, an empty primary not yet attached,
		// while the replica that takes over still follows the lost one. Healing, not resharding.
		{"active, a lost primary's replacement up before the failover: stays active", newSnapshot(Active, 3, 1, formed, withFailed("p0-0"), withReplacement(0)), ""},
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

func TestAwaitingFailover(t *testing.T) {
	s := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"))
	got := s.AwaitingFailover()
	if !reflect.DeepEqual(got, []FailoverWait{{Shard: 1, Replica: "p1-1", PrimaryID: "id-p1-0"}}) {
		t.Fatalf("%+v", got)
	}
	if got := newSnapshot(Active, 3, 1, formed, withFailed("p1-1")).AwaitingFailover(); len(got) != 0 {
		t.Fatalf("a lost replica is not a failover: %+v", got)
	}
	// Both nodes of shard 1 dead: no live replica, nothing to wait for (the data is lost).
	if got := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"), withFailed("p1-1")).AwaitingFailover(); len(got) != 0 {
		t.Fatalf("a shard with no live replica is not awaiting a failover: %+v", got)
	}
	// The replica follows the lost primary but never synced: Valkey will not promote it.
	unsynced := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"))
	unsynced.Pods[3].Node.ReplOffset, unsynced.Pods[3].Node.LinkUp = 0, false // p1-1
	if got := unsynced.AwaitingFailover(); len(got) != 0 {
		t.Fatalf("a replica that never synced cannot take over: %+v", got)
	}
	// The replica's node does not answer: unknown, not a replica that can take over.
	cut := newSnapshot(Active, 3, 1, formed, withFailed("p1-0"))
	cut.Pods[3].Node = &Node{Reachable: false, Err: "i/o timeout"}
	if got := cut.AwaitingFailover(); len(got) != 0 {
		t.Fatalf("an unreachable replica is not counted: %+v", got)
	}
}

func TestOutdatedUnsyncedAndNodeReady(t *testing.T) {
	s := newSnapshot(Active, 2, 1, formed)
	s.SpecHash = "new"
	for i := range s.Pods {
		s.Pods[i].SpecHash = "new"
	}
	s.Pods[1].SpecHash = "old"    // p0-1
	s.Pods[3].Node.LinkUp = false // p1-1
	if got := s.Outdated(); !reflect.DeepEqual(got, []string{"p0-1"}) {
		t.Errorf("Outdated = %v", got)
	}
	if got := s.Unsynced(); !reflect.DeepEqual(got, []string{"p1-1"}) {
		t.Errorf("Unsynced = %v", got)
	}
	var ready []string
	for _, p := range s.Pods {
		if NodeReady(p) {
			ready = append(ready, p.Name)
		}
	}
	if want := []string{"p0-0", "p0-1", "p1-0"}; !reflect.DeepEqual(ready, want) {
		t.Errorf("ready nodes %v, want %v", ready, want)
	}
	s.SpecHash = ""
	if got := s.Outdated(); got != nil {
		t.Errorf("unknown current hash: Outdated = %v", got)
	}
	// A primary without slots (a new node not yet placed) is not ready.
	if NodeReady(newSnapshot(Forming, 1, 0).Pods[0]) {
		t.Error("a slot-less primary is ready")
	}
}

// OwnedIDs is the one definition of the ids live pods own: a dead or deleting pod owns none, and a
// live pod whose node did not answer owns one the snapshot cannot name (AllAnswer says so).
func TestOwnedIDsAndAllAnswer(t *testing.T) {
	s := newSnapshot(Active, 2, 1, formed, withFailed("p0-0"))
	s.Pods[1].Deleting = true                                    // p0-1
	s.Pods[2].Node = &Node{Reachable: false, Err: "i/o timeout"} // p1-0
	if got, want := s.OwnedIDs(), map[string]bool{"id-p1-1": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("OwnedIDs = %v, want %v", got, want)
	}
	if got := s.AllAnswer(); got != "waiting for node p1-0 to answer: i/o timeout" {
		t.Fatalf("AllAnswer = %q", got)
	}
	if got := newSnapshot(Active, 2, 1, formed).AllAnswer(); got != "" {
		t.Fatalf("formed: AllAnswer = %q", got)
	}
	if got := newSnapshot(Bootstrapping, 2, 1, withPending("p1-1")).AllAnswer(); got != "waiting for pod p1-1 to run" {
		t.Fatalf("pending: AllAnswer = %q", got)
	}
	if got := newSnapshot(Bootstrapping, 2, 1, withoutPods).AllAnswer(); got != "waiting for pods" {
		t.Fatalf("no pods: AllAnswer = %q", got)
	}
}

// FormedOnce is the one answer to "was this cluster formed": the marker, whatever the state; an
// Active or Upgrading status that predates the marker; an Invalid one whose nodes had joined.
func TestFormedOnce(t *testing.T) {
	cases := []struct {
		name string
		s    Snapshot
		want bool
	}{
		{"new", newSnapshot(Initial, 3, 1, withoutPods), false},
		{"bootstrapping", newSnapshot(Bootstrapping, 3, 1), false},
		{"forming, nodes joined, not yet Active", newSnapshot(Forming, 3, 1, formed, joined("p0-0")), false},
		{"active without the marker (an older operator's status)", newSnapshot(Active, 3, 1, formed), true},
		{"upgrading without the marker", newSnapshot(Upgrading, 3, 1, formed), true},
		{"invalid with the marker, every pod dead", newSnapshot(Invalid, 3, 1, formedOnce, allFailed), true},
		{"invalid with the marker, every node record gone too", newSnapshot(Invalid, 3, 1, formedOnce, withoutPods), true},
		{"invalid without the marker, a node had joined", newSnapshot(Invalid, 3, 1, joined("p2-1"), allFailed), true},
		{"invalid without the marker, no node ever joined", newSnapshot(Invalid, 3, 1, allFailed), false},
		{"bootstrapping with the marker", newSnapshot(Bootstrapping, 3, 1, formedOnce), true},
	}
	for _, c := range cases {
		if got := c.s.FormedOnce(); got != c.want {
			t.Errorf("%s: FormedOnce = %v, want %v", c.name, got, c.want)
		}
	}
}

// The break test as a sequence of decisions: a formed cluster goes Invalid, loses every pod,
// and the cause is fixed. It never passes through Bootstrapping or Forming on its way back.
func TestFormedClusterNeverBootstrapsAgain(t *testing.T) {
	s := newSnapshot(Active, 2, 1, formed, formedOnce)
	visited := []State{s.State}
	step := func(mutate ...opt) {
		t.Helper()
		for _, o := range mutate {
			o(&s)
		}
		d := Decide(s)
		if d.Event == "" {
			return
		}
		next, err := New(s.State).Fire(d.Event)
		if err != nil {
			t.Fatal(err)
		}
		s.State = next
		visited = append(visited, next)
	}
	step(withProblem(`ValkeyConfig "x" not found`))
	step(allFailed)
	step(func(s *Snapshot) { s.SpecProblem = "" })
	// The replacements start, meet and are given slots, all while Active.
	step(func(s *Snapshot) { *s = newSnapshot(s.State, 2, 1, formedOnce) })
	step(meshed)
	step(formed)
	want := []State{Active, Invalid, Active}
	if !reflect.DeepEqual(visited, want) {
		t.Fatalf("states %v, want %v", visited, want)
	}
}

// A replica at offset 0 holds nothing, unless its primary never streamed a byte either (a new,
// empty primary, until its first replication PING).
func TestCaughtUpAtOffsetZero(t *testing.T) {
	pod := func(n Node) Pod { return Pod{Node: &n} }
	primary := func(off int64) Pod { return pod(Node{Reachable: true, ID: "p", Primary: true, ReplOffset: off}) }
	replica := func(off int64, linkUp, syncing bool) Pod {
		return pod(Node{Reachable: true, ID: "r", PrimaryID: "p", LinkUp: linkUp, SyncInProgress: syncing, ReplOffset: off})
	}
	for _, c := range []struct {
		name             string
		replica, primary Pod
		want             bool
	}{
		{"both at 0, linked", replica(0, true, false), primary(0), true},
		{"both at 0, link down", replica(0, false, false), primary(0), false},
		{"both at 0, syncing", replica(0, true, true), primary(0), false},
		{"replica at 0, primary streamed", replica(0, true, false), primary(14), false},
		{"within the bound", replica(1000, true, false), primary(2000), true},
		{"far behind", replica(1, true, false), primary(CatchUpBytes + 2), false},
	} {
		if got := CaughtUp(c.replica, c.primary); got != c.want {
			t.Errorf("%s: CaughtUp = %v, want %v", c.name, got, c.want)
		}
	}
}
