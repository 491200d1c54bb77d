package plan

import (
	"reflect"
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
)

// promoted: p0-0's container is gone (its pod Failed) and p0-1 serves shard 0's slots in every
// view; p0-0 is still known everywhere as a primary without slots, as Valkey shows a lost primary
// until it flags it fail.
func promoted(s *fsm.Snapshot) {
	withFailed("p0-0")(s)
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Name == "p0-1" {
			p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = true, "", slotsOf(0, s.Shards)
		}
	}
	for i := range s.Pods {
		n := s.Pods[i].Node
		if n == nil || !n.Reachable {
			continue
		}
		n.Known["id-p0-0"], n.Known["id-p0-1"] = nil, slotsOf(0, s.Shards)
		delete(n.Follows, "id-p0-1")
	}
}

// The dead primary of a shard whose replica took over is forgotten at once, on every reachable
// node, whatever else is pending: Valkey lists it in CLUSTER SHARDS as a healthy primary until it
// flags it fail, and valkey-go may send the shard's writes there meanwhile (chaos seed 60606,
// acl +05:19: 7.5 s).
func TestDead(t *testing.T) {
	forget := Forget{NodeID: "id-p0-0", Pods: []string{"p0-1", "p1-0", "p1-1", "p2-0", "p2-1"}}
	cases := []struct {
		name string
		s    fsm.Snapshot
		want []Action
	}{
		{"a lost primary taken over: forgotten at once",
			newSnapshot(fsm.Active, 3, 1, formed, promoted), []Action{forget}},
		{"its replacement not yet running: forgotten all the same",
			newSnapshot(fsm.Active, 3, 1, formed, promoted, withPendingPod("p0-new", 0)), []Action{forget}},
		{"a node still sees it serve slots: not yet",
			newSnapshot(fsm.Active, 3, 1, formed, promoted, withPod("p2-1", func(p *fsm.Pod) { p.Node.Known["id-p0-0"] = slotsOf(0, 3) })), nil},
		{"a replica still follows it: not yet (the failover first)",
			newSnapshot(fsm.Active, 3, 2, formed, promoted), nil},
		{"its pod still runs, cut off: never (unknown is not absent)",
			newSnapshot(fsm.Active, 3, 1, formed, promoted, withPod("p0-0", func(p *fsm.Pod) { p.Phase = fsm.PodRunning })), nil},
		{"a dead replica: the cleanup planner's, once Valkey flags it",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-1")), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := run(dead, fsm.Active, c.s)
			if !reflect.DeepEqual(p.Actions, c.want) {
				t.Fatalf("got %v, want %v", p.Actions, c.want)
			}
		})
	}
}

// withPendingPod adds a pod of shard that the scheduler has not placed yet.
func withPendingPod(name string, shard int) opt {
	return func(s *fsm.Snapshot) {
		s.Pods = append(s.Pods, fsm.Pod{Name: name, Shard: shard, Phase: fsm.PodPending})
	}
}
