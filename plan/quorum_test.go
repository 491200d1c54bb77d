package plan

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// Without a majority of slot-holding primaries Valkey cannot elect: TAKEOVER on the most
// up-to-date synced replica. With a majority, wait for Valkey's own failover.
func TestQuorum(t *testing.T) {
	cases := []struct {
		name    string
		s       fsm.Snapshot
		want    []Action
		waiting string
	}{
		{"1x2 lost its primary: the most up-to-date replica takes over",
			newSnapshot(fsm.Active, 1, 2, formed, withFailed("p0-0"), withFailFlag("id-p0-0"), withOffsets(map[string]int64{"p0-1": 10, "p0-2": 30})),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-2", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the takeover of shard 0"},
		{"2x1: one of two primaries is no majority",
			newSnapshot(fsm.Active, 2, 1, formed, withFailed("p0-0")),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the takeover of shard 0"},
		// Two of three primaries alive: they can vote, so the failover planner forces the
		// promotion of p0-1 at once; no TAKEOVER.
		{"3x1 with two primaries alive: FORCE, not TAKEOVER",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0")),
			[]Action{CreatePod{Shard: 0}, FailoverForce{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the failover of shard 0"},
		// The same with a replica still Joining: no FORCE, no TAKEOVER; Valkey's own failover
		// decides, and the pass replaces the dead pod and waits for the cluster to agree again.
		{"3x1 with two primaries alive and a Joining replica waits for Valkey's failover",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withLifecycle("p0-1", v1.LifecycleJoining)),
			[]Action{CreatePod{Shard: 0}}, "waiting for the cluster to agree: shard 0 has 1 of its 2 pods"},
		// The measured outage: the network of two of three primaries cut, pods still Running.
		// Their replicas flag them `fail?` (too few primaries to agree on `fail`).
		{"2 of 3 primaries cut, pods Running: takeover",
			newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withCut("p1-0"), withSuspectFlag("id-p0-0"), withSuspectFlag("id-p1-0")),
			[]Action{Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the takeover of shard 0"},
		// Only the operator lost them: their replicas still reach them and flag nothing. Their
		// pods run; nothing says they are gone. Wait, and take no Valkey step.
		{"2 of 3 primaries unreachable by the operator only: no takeover",
			newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withCut("p1-0")),
			nil, "waiting for node p0-0 to answer: i/o timeout"},
		// A Leaving replica was detached from its primary: its copy stopped there, however
		// large its offset, and it is on its way out.
		{"1x2 lost its primary: a Leaving replica never takes over",
			newSnapshot(fsm.Active, 1, 2, formed, withFailed("p0-0"), withFailFlag("id-p0-0"), withOffsets(map[string]int64{"p0-1": 10, "p0-2": 30}), withLifecycle("p0-2", v1.LifecycleLeaving)),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the takeover of shard 0"},
		{"a replica that never synced is never promoted",
			newSnapshot(fsm.Active, 1, 1, formed, withFailed("p0-0"), withOffsets(map[string]int64{"p0-1": 0})),
			[]Action{CreatePod{Shard: 0}}, "waiting for the cluster to agree: shard 0 has 1 of its 2 pods"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Pass(fsm.Active, c.s)
			p.Actions = steps(p.Actions) // the joins recorded: TestJoinsPlanner
			if !reflect.DeepEqual(p.Actions, c.want) || p.Waiting != c.waiting || p.Err != nil {
				t.Fatalf("got %v %q %v\nwant %v %q", p.Actions, p.Waiting, p.Err, c.want, c.waiting)
			}
		})
	}
}

// After the takeover of shard 0 the cut cluster has two of three slot holders alive again: no
// second takeover, Valkey's own failover saves shard 1.
func TestQuorumAfterTakeover(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withCut("p1-0"), withSuspectFlag("id-p0-0"), withSuspectFlag("id-p1-0"))
	spread := slot.EvenSpread(3)
	for i := range s.Pods {
		n := s.Pods[i].Node
		if !n.Reachable {
			continue
		}
		n.Known["id-p0-0"], n.Known["id-p0-1"] = nil, slot.Set{spread[0]}
		if s.Pods[i].Name == "p0-1" {
			n.Primary, n.PrimaryID, n.MySlots = true, "", slot.Set{spread[0]}
		}
	}
	if p := run(quorum, fsm.Active, s); len(p.Actions) != 0 || p.Waiting != "" {
		t.Fatalf("second takeover: %v %q", p.Actions, p.Waiting)
	}
}

func TestQuorumOnlyOnceFormed(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 1, formed, withFailed("p0-0"))
	for _, st := range []fsm.State{fsm.Bootstrapping, fsm.Invalid} {
		s.State = st // never formed: no status.formedAt, the persisted state is the pass's
		for i := range s.Pods {
			s.Pods[i].Lifecycle = string(v1.LifecycleJoining) // and no node ever completed its join
		}
		if p := run(quorum, st, s); len(p.Actions) != 0 {
			t.Fatalf("%s: %v", st, p.Actions)
		}
	}
}

// TestQuorumCountsWhomOnlyTheOperatorCannotReach: two primaries do not answer the operator, but
// only one is flagged by a reachable node; the other (a slow answer, a one-sided cut) still
// votes for Valkey, so its majority stands and nothing is taken over. Once both are flagged, the
// flagged shard is taken over. Found by review: a node the pool reported unreachable counted as
// gone, and a single `fail?` then drew a TAKEOVER while the old primary may still take writes.
func TestQuorumCountsWhomOnlyTheOperatorCannotReach(t *testing.T) {
	suspect := func(ids ...string) opt {
		return withPod("p0-1", func(p *fsm.Pod) {
			p.Node.Suspected = map[string]bool{}
			for _, id := range ids {
				p.Node.Suspected[id] = true
			}
		})
	}
	s := newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withCut("p1-0"), suspect("id-p0-0"))
	for _, a := range Pass(fsm.Active, s).Actions {
		if _, ok := a.(Takeover); ok {
			t.Fatalf("TAKEOVER while p1-0, flagged by no node, still votes: %v", a)
		}
	}
	s = newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withCut("p1-0"), suspect("id-p0-0", "id-p1-0"))
	var took []string
	for _, a := range Pass(fsm.Active, s).Actions {
		if tk, ok := a.(Takeover); ok {
			took = append(took, tk.Pod)
		}
	}
	if len(took) != 1 || took[0] != "p0-1" {
		t.Fatalf("both flagged: takeovers %v, want p0-1", took)
	}
}
