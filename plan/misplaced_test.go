package plan

import (
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// drainedInto: shard from's primary gave its slots to shard to's primary and, as Valkey does
// then, made itself and its replicas replicas of it.
func drainedInto(from, to int) opt {
	return func(s *fsm.Snapshot) {
		var target *fsm.Pod
		for i := range s.Pods {
			if p := &s.Pods[i]; p.Shard == to && p.Node.Primary {
				target = p
			}
		}
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.Shard != from {
				continue
			}
			if p.Node.Primary {
				target.Node.MySlots = append(target.Node.MySlots, p.Node.MySlots...)
			}
			p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = false, target.Node.ID, nil
		}
		for i := range s.Pods {
			for j := range s.Pods {
				s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			}
		}
	}
}

func TestMisplacedRetiresNodesOfADrainedShardThatIsWantedAgain(t *testing.T) {
	// 3 shards wanted; shard 2 was drained into shard 1 by a scale-in to 2, then raised again.
	s := newSnapshot(fsm.Active, 3, 1, formed, drainedInto(2, 1))
	p := run(misplaced, fsm.Upgrading, s)
	if len(p.Actions) != 1 {
		t.Fatalf("actions %v, want one retirement", p.Actions)
	}
	if d, ok := p.Actions[0].(DeletePod); !ok || d.Pod != "p2-0" || d.Reason != RetireMisplaced {
		t.Fatalf("action %#v, want DeletePod p2-0 (%s)", p.Actions[0], RetireMisplaced)
	}
	// The whole chain does the same: nothing before it acts on this cluster.
	if p := Pass(fsm.Upgrading, s); len(p.Actions) != 1 || p.Actions[0] != (DeletePod{Pod: "p2-0", Reason: RetireMisplaced}) {
		t.Fatalf("chain planned %v (waiting %q), want the retirement of p2-0", p.Actions, p.Waiting)
	}
}

func TestMisplacedLeavesOtherClustersAlone(t *testing.T) {
	cases := map[string]fsm.Snapshot{
		"formed": newSnapshot(fsm.Active, 3, 1, formed),
		"removed shard": func() fsm.Snapshot {
			s := newSnapshot(fsm.Active, 3, 1, formed, drainedInto(2, 1))
			s.Shards = 2
			return s
		}(),
		// A replica of a dead primary of its own shard: the failover planner's case.
		"orphan replica": newSnapshot(fsm.Active, 3, 1, formed, withGone("p1-0")),
		// A new shard: its primary serves no slot yet, its replica replicates it.
		"new shard": newSnapshot(fsm.Active, 3, 1, formed, func(s *fsm.Snapshot) {
			for i := range s.Pods {
				if s.Pods[i].Shard == 2 && s.Pods[i].Node.Primary {
					s.Pods[0].Node.MySlots = append(s.Pods[0].Node.MySlots, s.Pods[i].Node.MySlots...)
					s.Pods[i].Node.MySlots = slot.Set{}
				}
			}
		}),
	}
	for name, s := range cases {
		if p := run(misplaced, fsm.Active, s); len(p.Actions) != 0 {
			t.Errorf("%s: planned %v", name, p.Actions)
		}
	}
}
