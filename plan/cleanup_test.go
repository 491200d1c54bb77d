package plan

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

func TestCleanupHealsInOrder(t *testing.T) {
	// A dead replica is replaced; until the nodes agree it failed it is not forgotten.
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-1"))
	if p := Pass(fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 1}}) {
		t.Fatal(p.Actions)
	}
	// The replacement runs and has joined as a replica of p1-0; the dead id is still known and
	// every node flags it failed: forget it on every node, in one step.
	s = newSnapshot(fsm.Active, 3, 1, formed)
	s.Pods[3].Name, s.Pods[3].Node.ID = "p1-9", "id-p1-9"
	for i := range s.Pods {
		s.Pods[i].Node.Known["id-p1-9"] = nil
		s.Pods[i].Node.Failed = map[string]bool{"id-p1-1": true}
	}
	s.Pods = append(s.Pods, fsm.Pod{Name: "p1-1", Shard: 1, Phase: fsm.PodFailed})
	p := Pass(fsm.Active, s)
	want := Forget{NodeID: "id-p1-1", Pods: []string{"p0-0", "p0-1", "p1-0", "p1-9", "p2-0", "p2-1"}}
	if !reflect.DeepEqual(p.Actions, []Action{want}) {
		t.Fatal(p.Actions)
	}
	// Forgotten: the failed pod is deleted.
	for i := range s.Pods {
		if s.Pods[i].Node != nil {
			delete(s.Pods[i].Node.Known, "id-p1-1")
		}
	}
	if p := Pass(fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{DeletePod{Pod: "p1-1"}}) {
		t.Fatal(p.Actions)
	}
	// Two failed pods: one deletion per pass, the first by name.
	s.Pods = append(s.Pods, fsm.Pod{Name: "p2-7", Shard: 2, Phase: fsm.PodFailed})
	if p := Pass(fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{DeletePod{Pod: "p1-1"}}) {
		t.Fatal(p.Actions)
	}
}

// A dead primary with a live replica is never forgotten, even when the node that happens to be
// first by name (a fresh replacement) sees it without slots: that was a whole-cluster outage. The
// pass plans nothing and waits for Valkey's failover to promote p1-1.
func TestNoForgetOfAPrimaryAReplicaStillFollows(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-0"), withFailFlag("id-p1-0"))
	// The replacement "a-new" sorts first; it learnt the dead primary from gossip, slot-less.
	s.Pods = append(s.Pods, fsm.Pod{Name: "a-new", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.9.9",
		Node: &fsm.Node{Reachable: true, ID: "id-new", Primary: true, Known: map[string]slot.Set{}, Failed: map[string]bool{"id-p1-0": true}}})
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
	s.Pods = append(s.Pods[len(s.Pods)-1:], s.Pods[:len(s.Pods)-1]...) // sorted by name
	if p := run(cleanup, fsm.Active, s); len(p.Actions) != 0 || p.Err != nil {
		t.Fatalf("got %v %v; want nothing while p1-1 still follows the dead primary", p.Actions, p.Err)
	}
	// The whole chain promotes p1-1 first (the failover planner), and forgets only later.
	p := Pass(fsm.Active, s)
	if want := []Action{FailoverForce{Pod: "p1-1", PrimaryID: "id-p1-0", Shard: 1}}; !reflect.DeepEqual(p.Actions, want) || p.Err != nil {
		t.Fatalf("got %v %v; want %v", p.Actions, p.Err, want)
	}
	if got := s.AwaitingFailover(); !reflect.DeepEqual(got, []fsm.FailoverWait{{Shard: 1, Replica: "p1-1", PrimaryID: "id-p1-0"}}) {
		t.Fatalf("awaiting failover: %+v", got)
	}
}

// A shard that lost its only node is served again, empty: its dead primary is forgotten once
// every node flags it failed, and its slots go to the replacement.
func TestLostSoleNodeShardIsServedAgain(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 0, formed, withFailed("p1-0"), withFailFlag("id-p1-0"))
	s.Pods = append(s.Pods, fsm.Pod{Name: "p1-9", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.9.9",
		Node: &fsm.Node{Reachable: true, ID: "id-p1-9", Primary: true, Known: map[string]slot.Set{}, Failed: map[string]bool{"id-p1-0": true}}})
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			for j := range s.Pods {
				if m := s.Pods[j].Node; m != nil && m.ID != "" {
					n.Known[m.ID] = m.MySlots
				}
			}
			n.Known["id-p1-0"] = slot.EvenSpread(3)[1:2]
		}
	}
	p := Pass(fsm.Active, s)
	if !reflect.DeepEqual(p.Actions, []Action{Forget{NodeID: "id-p1-0", Pods: []string{"p0-0", "p1-9", "p2-0"}}}) {
		t.Fatalf("want forget of the dead sole primary, got %v", p.Actions)
	}
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			delete(n.Known, "id-p1-0")
		}
	}
	p = Pass(fsm.Active, s)
	if !reflect.DeepEqual(p.Actions, []Action{AddSlots{Pod: "p1-9", Shard: 1, Slots: slot.EvenSpread(3)[1:2], Lost: true}}) {
		t.Fatalf("want the shard's slots on the replacement, got %v", p.Actions)
	}
}

// Unknown is not absent: a node whose pod runs but does not answer is never forgotten, even when
// every reachable node flags it failed.
func TestNoForgetOfAnUnreachableNode(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withCut("p1-1"), withFailFlag("id-p1-1"))
	p := Pass(fsm.Active, s)
	if len(p.Actions) != 0 || p.Waiting != "waiting for node p1-1 to answer: i/o timeout" {
		t.Fatalf("%v %q", p.Actions, p.Waiting)
	}
	if p := run(cleanup, fsm.Active, s); len(p.Actions) != 0 || p.Waiting != "waiting for node p1-1 to answer: i/o timeout" {
		t.Fatalf("cleanup gate: %v %q", p.Actions, p.Waiting)
	}
}

// A replica whose Kubernetes node stopped (pod Running, NodeLost, node unreachable) is replaced
// at once, does not hold back the steps that need every node's answer, and is retired once its
// replacement has joined and synced. The same pod still answering is alive and left alone.
func TestPodLostWithItsNodeIsReplacedThenRetired(t *testing.T) {
	lost := func(p *fsm.Pod) {
		p.NodeLost, p.Ready, p.Node = true, false, &fsm.Node{Reachable: false, Err: "i/o timeout"}
	}
	s := newSnapshot(fsm.Active, 3, 1, formed, withPod("p1-1", lost))
	if p := Pass(fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 1}}) {
		t.Fatalf("actions %v, waiting %q", p.Actions, p.Waiting)
	}
	// Only the control plane lost it: it answers, so it is alive and nothing is planned.
	alive := newSnapshot(fsm.Active, 3, 1, formed, withPod("p1-1", func(p *fsm.Pod) { p.NodeLost, p.Ready = true, false }))
	if p := Pass(fsm.Active, alive); len(p.Actions) != 0 {
		t.Fatalf("a pod that answers was treated as lost: %v", p.Actions)
	}
	// The replacement p1-9 joined and synced, and every node flags the lost id `fail`: forget it,
	// then retire the lost pod.
	s = newSnapshot(fsm.Active, 3, 1, formed)
	s.Pods[3].Name, s.Pods[3].Node.ID = "p1-9", "id-p1-9"
	for i := range s.Pods {
		s.Pods[i].Node.Known["id-p1-9"] = nil
		s.Pods[i].Node.Failed = map[string]bool{"id-p1-1": true}
	}
	gone := fsm.Pod{Name: "p1-1", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.1.3"}
	lost(&gone)
	s.Pods = append(s.Pods, gone)
	if p := Pass(fsm.Active, s); len(p.Actions) != 1 || p.Actions[0].(Forget).NodeID != "id-p1-1" {
		t.Fatalf("want the lost id forgotten first: %v", p.Actions)
	}
	for i := range s.Pods {
		if s.Pods[i].Node != nil {
			delete(s.Pods[i].Node.Known, "id-p1-1")
		}
	}
	if p := Pass(fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{DeletePod{Pod: "p1-1"}}) {
		t.Fatalf("want the lost pod retired: %v", p.Actions)
	}
}

// A node the operator retired (its pod being deleted) that serves no slot is forgotten at once,
// without waiting for Valkey to flag it `fail`; a deleting primary that still serves slots is not.
func TestRetiredNodeIsForgottenAtOnce(t *testing.T) {
	s := newSnapshot(fsm.Upgrading, 2, 1, formed, withDeleting("p1-1", true))
	p := run(cleanup, fsm.Upgrading, s)
	want := Forget{NodeID: "id-p1-1", Pods: []string{"p0-0", "p0-1", "p1-0"}}
	if !reflect.DeepEqual(p.Actions, []Action{want}) {
		t.Fatalf("want %v, got %v", want, p.Actions)
	}
	s = newSnapshot(fsm.Upgrading, 2, 1, formed, withDeleting("p1-0", true))
	if p := run(cleanup, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("a deleting primary that serves slots was forgotten: %v", p.Actions)
	}
}

// A 2x1 cluster lost both pods of shard 1. The survivors are one slot holder of two: Valkey never
// flags the dead nodes `fail` (one primary's report is not a majority, and the replacement
// primary cannot learn of nodes it cannot reach), only `fail?`. Their ids are still forgotten,
// the primary's first, so that shard 1's slots are served again (as lost) instead of staying
// claimed by nobody alive. Not while a pod that may still run could own the id (a pod being
// deleted whose container runs, whose id is not known), and not while the survivors are a
// majority (then Valkey's own `fail` is awaited).
func TestDeadShardForgottenWithoutQuorum(t *testing.T) {
	build := func(opts ...opt) fsm.Snapshot {
		s := newSnapshot(fsm.Active, 2, 1, append([]opt{formed, withFailed("p1-0"), withFailed("p1-1"), withSuspectFlag("id-p1-0"), withSuspectFlag("id-p1-1")}, opts...)...)
		spread := slot.EvenSpread(2)
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Reachable {
				n.Known["id-p1-0"], n.Known["id-p1-1"] = slot.Set{spread[1]}, nil
			}
		}
		// The replacement primary, met: it knows the survivors, not the dead.
		s.Pods = append(s.Pods, fsm.Pod{Name: "p1-9", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.9.9", Lifecycle: string(v1.LifecycleJoining),
			Node: &fsm.Node{Reachable: true, ID: "id-p1-9", Primary: true, Known: map[string]slot.Set{"id-p0-0": {spread[0]}, "id-p0-1": nil, "id-p1-9": nil}}})
		for i := range s.Pods[:4] {
			if n := s.Pods[i].Node; n.Reachable {
				n.Known["id-p1-9"] = nil
			}
		}
		return s
	}
	if p := run(cleanup, fsm.Active, build()); !reflect.DeepEqual(p.Actions, []Action{Forget{NodeID: "id-p1-0", Pods: []string{"p0-0", "p0-1"}}}) {
		t.Fatalf("want the dead primary forgotten, got %v %q", p.Actions, p.Waiting)
	}
	// A deleting pod whose container still runs and whose id is unknown may be the node.
	s := build()
	s.Pods = append(s.Pods, fsm.Pod{Name: "p1-8", Shard: 1, Phase: fsm.PodRunning, IP: "10.244.9.8", Deleting: true, Node: &fsm.Node{Reachable: false, Err: "i/o timeout"}})
	if p := run(cleanup, fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("forgot an id a running pod may own: %v", p.Actions)
	}
	// One live node still reaches it: not gone.
	s = build()
	delete(s.Pods[1].Node.Suspected, "id-p1-0")
	if p := run(cleanup, fsm.Active, s); !reflect.DeepEqual(p.Actions, []Action{Forget{NodeID: "id-p1-1", Pods: []string{"p0-0", "p0-1"}}}) {
		t.Fatalf("want only the replica (unreachable from all) forgotten, got %v", p.Actions)
	}
	// With a majority of slot holders alive, only Valkey's `fail` counts.
	s = newSnapshot(fsm.Active, 3, 0, formed, withFailed("p1-0"), withSuspectFlag("id-p1-0"))
	for i := range s.Pods {
		if n := s.Pods[i].Node; n != nil && n.Reachable {
			n.Known["id-p1-0"] = slot.EvenSpread(3)[1:2]
		}
	}
	if p := run(cleanup, fsm.Active, s); len(p.Actions) != 0 {
		t.Fatalf("forgot a node only suspected while the survivors can agree: %v", p.Actions)
	}
}
