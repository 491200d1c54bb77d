package plan

import (
	"reflect"
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// withEpochs gives every reachable node the same view of the config epochs (by pod name: the
// fixtures' node ids are "id-" + name) and the current epoch.
func withEpochs(current uint64, byPod map[string]uint64) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			n := s.Pods[i].Node
			if n == nil || !n.Reachable {
				continue
			}
			n.CurrentEpoch, n.Epochs = current, map[string]uint64{}
			for pod, e := range byPod {
				n.Epochs["id-"+pod] = e
			}
		}
	}
}

// The CI failure on a522f5f: formation left replica p0-1 on its primary's config epoch, the
// largest; a TAKEOVER on it does not bump it, and its claim ties. Rule 1: another node's
// BUMPEPOCH raises the cluster's epoch first, and the TAKEOVER waits for the replica to have it.
// Without the tie the TAKEOVER goes alone.
func TestTakeoverRaisesATiedEpochFirst(t *testing.T) {
	cut := []opt{formed, withCut("p0-0"), withCut("p1-0"), withSuspectFlag("id-p0-0"), withSuspectFlag("id-p1-0")}
	cases := []struct {
		name    string
		current uint64
		epochs  map[string]uint64
		want    []Action
	}{
		{"tie at the largest epoch: raise first", 4,
			map[string]uint64{"p0-0": 4, "p0-1": 4, "p1-0": 2, "p1-1": 1, "p2-0": 3, "p2-1": 3},
			[]Action{BumpEpoch{Pod: "p1-1", Reason: EpochBeforeTakeover}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, AfterEpoch: 4}}},
		{"the replica's epoch is the largest, its primary's lower: it wins alone", 5,
			map[string]uint64{"p0-0": 4, "p0-1": 5, "p1-0": 2, "p1-1": 1, "p2-0": 3, "p2-1": 3},
			[]Action{Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}},
		{"a tie below the current epoch: Valkey bumps the replica itself", 5,
			map[string]uint64{"p0-0": 4, "p0-1": 4, "p1-0": 2, "p1-1": 1, "p2-0": 3, "p2-1": 3},
			[]Action{Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}},
		{"a tie with another shard's node is no tie with the lost primary", 4,
			map[string]uint64{"p0-0": 1, "p0-1": 4, "p1-0": 2, "p1-1": 3, "p2-0": 4, "p2-1": 3},
			[]Action{Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSnapshot(fsm.Active, 3, 1, append(cut, withEpochs(c.current, c.epochs))...)
			p := Pass(fsm.Active, s)
			if got := steps(p.Actions); !reflect.DeepEqual(got, c.want) || p.Waiting != "waiting for the takeover of shard 0" || p.Err != nil {
				t.Fatalf("got %v %q %v\nwant %v", got, p.Waiting, p.Err, c.want)
			}
		})
	}
}

// Rule 2: a takeover that tied anyway (before rule 1, or its wait ran out). p0-1 serves shard
// 0's slots in its own view; the others still give them to the cut p0-0, at p0-1's very epoch.
// While p0-1's epoch is the largest it knows another node raises the cluster's epoch; once
// p0-1 knows a larger one, it is bumped itself. A claim that won is left alone.
func TestTiedClaimIsBumped(t *testing.T) {
	spread := slot.EvenSpread(3)
	tookOver := func(s *fsm.Snapshot) {
		for i := range s.Pods {
			n := s.Pods[i].Node
			if n == nil || !n.Reachable {
				continue
			}
			n.Known["id-p0-0"], n.Known["id-p0-1"] = slot.Set{spread[0]}, nil
			if s.Pods[i].Name == "p0-1" {
				n.Primary, n.PrimaryID, n.MySlots = true, "", slot.Set{spread[0]}
				n.Known["id-p0-0"], n.Known["id-p0-1"] = nil, slot.Set{spread[0]}
			}
		}
	}
	opts := func(current uint64, p00 uint64) []opt {
		return []opt{formed, withCut("p0-0"), withCut("p1-0"), withSuspectFlag("id-p0-0"), withSuspectFlag("id-p1-0"),
			withEpochs(current, map[string]uint64{"p0-0": p00, "p0-1": 4, "p1-0": 2, "p1-1": 1, "p2-0": 3, "p2-1": 3}), tookOver}
	}
	const wait = "waiting for p0-1's claim on its slots to win over id-p0-0's equal config epoch"
	cases := []struct {
		name    string
		s       fsm.Snapshot
		want    []Action
		waiting string
	}{
		{"its epoch is the largest it knows: another node raises the cluster's", newSnapshot(fsm.Active, 3, 1, opts(4, 4)...),
			[]Action{BumpEpoch{Pod: "p1-1", Reason: EpochClaimTied}}, wait},
		{"it knows a larger epoch: it is bumped", newSnapshot(fsm.Active, 3, 1, opts(5, 4)...),
			[]Action{BumpEpoch{Pod: "p0-1", Reason: EpochClaimTied}}, wait},
		{"its claim won: nothing", newSnapshot(fsm.Active, 3, 1, opts(4, 2)...), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := run(epochs, fsm.Active, c.s)
			if !reflect.DeepEqual(p.Actions, c.want) || p.Waiting != c.waiting {
				t.Fatalf("got %v %q\nwant %v %q", p.Actions, p.Waiting, c.want, c.waiting)
			}
		})
	}
}
