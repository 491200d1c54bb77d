package plan

import (
	"reflect"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// When Kubernetes says a primary's container is gone, its synced replica is promoted at once
// (FORCE) while the surviving primaries can vote; TAKEOVER stays the quorum planner's. A primary
// whose pod is being deleted while it still runs is handed over gracefully.
func TestFailover(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	force0 := FailoverForce{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}
	const waiting0 = "waiting for the failover of shard 0"
	cases := []struct {
		name    string
		s       fsm.Snapshot
		want    []Action
		waiting string
	}{
		{"pod Failed, replica synced and Active: FORCE at once",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0")),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"pod gone from the API: FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withGone("p0-0")),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"pod deleted and its process exited: FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withDeleting("p0-0", false)),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"the most up-to-date synced replica is promoted",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withOffsets(map[string]int64{"p0-1": 10, "p0-2": 30})),
			[]Action{CreatePod{Shard: 0}, FailoverForce{Pod: "p0-2", PrimaryID: "id-p0-0", Shard: 0}}, waiting0},
		{"a more up-to-date replica still Joining is passed over",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withOffsets(map[string]int64{"p0-1": 10, "p0-2": 30}), withLifecycle("p0-2", v1.LifecycleJoining)),
			[]Action{CreatePod{Shard: 0}, FailoverForce{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, waiting0},
		{"the only replica is Joining: nothing, Valkey decides",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withLifecycle("p0-1", v1.LifecycleJoining)),
			[]Action{CreatePod{Shard: 0}}, "waiting for the cluster to agree: shard 0 has 1 of its 2 pods"},
		{"the only replica never synced (offset 0): nothing",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withOffsets(map[string]int64{"p0-1": 0})),
			[]Action{CreatePod{Shard: 0}}, "waiting for the cluster to agree: shard 0 has 1 of its 2 pods"},
		{"primary's pod Running but unreachable: nothing, Valkey's failure detection decides",
			newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0")),
			nil, "waiting for node p0-0 to answer: i/o timeout"},
		{"primary's pod Running, unreachable and flagged fail: still Valkey's",
			newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0"), withFailFlag("id-p0-0")),
			nil, "waiting for node p0-0 to answer: i/o timeout"},
		// p1-1 runs, does not answer, and no status ever recorded its id: it may be the primary
		// the replica follows. Unknown is not absent.
		{"a silent live pod of unknown id may be the primary: nothing",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withCut("p1-1"), withPod("p1-1", func(p *fsm.Pod) { p.LastNodeID = "" })),
			[]Action{CreatePod{Shard: 0}}, "waiting for node p1-1 to answer: i/o timeout"},
		{"no majority of primaries: TAKEOVER, not FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withFailed("p1-0")),
			[]Action{CreatePod{Shard: 0}, CreatePod{Shard: 1}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}}, "waiting for the takeover of shard 0"},
		{"a FORCE issued a second ago: wait, no second promotion",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, time.Second)),
			[]Action{CreatePod{Shard: 0}}, waiting0},
		// The executor takes over itself when a FORCE has not taken within FailoverCheck; a pass
		// that finds one unlanded later (its operator killed in between) takes over at once
		// rather than wait out FailoverRetry: the replica's next election is barred for 20 s.
		{"a FORCE whose replica still follows the lost primary 3 s later did not take: TAKEOVER",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, 3*time.Second)),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Reason: TakeoverForceRefused}}, waiting0},
		{"a FORCE older than FailoverRetry that Valkey did not carry out: TAKEOVER, not a second FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, FailoverRetry+time.Second)),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Reason: TakeoverForceRefused}}, waiting0},
		{"a TAKEOVER issued 3 s ago is awaited",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Takeover: true}, now, 3*time.Second)),
			[]Action{CreatePod{Shard: 0}}, waiting0},
		// Chaos seed 60606: a spread failover made p0-1 a replica of p0-0 1.3 s before p0-0 was
		// killed; p1-0 still saw p0-1 as a primary and refused it its vote.
		{"a voting primary still sees the replica as a primary: TAKEOVER at once, no FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withPod("p1-0", func(p *fsm.Pod) { delete(p.Node.Follows, "id-p0-1") })),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Reason: TakeoverStaleView}}, waiting0},
		{"a voting primary sees the replica follow another primary: TAKEOVER",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withPod("p2-0", func(p *fsm.Pod) { p.Node.Follows["id-p0-1"] = "id-p2-0" })),
			[]Action{CreatePod{Shard: 0}, Takeover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Reason: TakeoverStaleView}}, waiting0},
		{"one stale voter of four alive, three votes needed of five: FORCE",
			newSnapshot(fsm.Active, 5, 1, formed, withFailed("p0-0"), withPod("p1-0", func(p *fsm.Pod) { delete(p.Node.Follows, "id-p0-1") })),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"the replica of a FORCE issued a second ago died: another one at once",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withFailed("p0-1"),
				withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, time.Second)),
			[]Action{CreatePod{Shard: 0}, CreatePod{Shard: 0}, FailoverForce{Pod: "p0-2", PrimaryID: "id-p0-0", Shard: 0}}, waiting0},
		{"the replica of a FORCE issued a second ago is silent: wait, it may be electing",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withCut("p0-1"),
				withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, time.Second)),
			[]Action{CreatePod{Shard: 0}}, waiting0},
		// The other replica of id-p0-0 has not heard of the promotion yet: it still follows the
		// lost primary. Promoting it too would make two primaries of shard 0.
		{"the intent's replica is a primary now: landed, its shard's other replica is left alone",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withPod("p0-1", func(p *fsm.Pod) {
				p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = true, "", slotsOf(0, 3)
			}), withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true}, now, time.Second)),
			[]Action{CreatePod{Shard: 0}, Replicate{Pod: "p0-2", PrimaryID: "id-p0-1"}}, "waiting for replicas to attach"},
		{"a replica promoted without an intent (Valkey's own failover): no second promotion",
			newSnapshot(fsm.Active, 3, 2, formed, withFailed("p0-0"), withFailed("p1-0"), withPod("p0-1", func(p *fsm.Pod) {
				p.Node.Primary, p.Node.PrimaryID, p.Node.MySlots = true, "", slotsOf(0, 3)
			})),
			[]Action{CreatePod{Shard: 0}, CreatePod{Shard: 1}, Takeover{Pod: "p1-1", PrimaryID: "id-p1-0", Shard: 1}}, "waiting for the takeover of shard 1"},
		{"an intent for another primary does not hold this one back",
			newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withIntent(fsm.FailoverIntent{Shard: 2, Pod: "p2-1", PrimaryID: "id-p2-0", Force: true}, now, time.Second)),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"a deleting primary still running: graceful failover before it stops",
			newSnapshot(fsm.Active, 3, 1, formed, withDeleting("p0-0", true)),
			[]Action{CreatePod{Shard: 0}, Failover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Purpose: HandOver}}, waiting0},
		// The leaving primary takes part in its own handover: no majority is needed, and no
		// TAKEOVER is issued against a primary that still serves.
		{"1x1, the primary's pod deleted: graceful failover, not TAKEOVER",
			newSnapshot(fsm.Active, 1, 1, formed, withDeleting("p0-0", true)),
			[]Action{CreatePod{Shard: 0}, Failover{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0, Purpose: HandOver}}, waiting0},
		// Valkey 9 hands over by itself on SIGTERM: a CLUSTER FAILOVER of the operator's own
		// would restart the one under way.
		{"a deleting primary that hands over by itself (shutdown-on-sigterm failover): the pass waits",
			newSnapshot(fsm.Active, 3, 1, formed, withDeleting("p0-0", true), withPod("p0-0", func(p *fsm.Pod) {
				p.Settings = map[string]string{"shutdown-on-sigterm": "failover"}
			})),
			[]Action{CreatePod{Shard: 0}}, "shard 0: waiting for p0-0 to hand its slots over on its way out (shutdown-on-sigterm failover)"},
		// Five shards: the deleting primary's id is no live pod's, and the others are a majority.
		{"a primary handing over by itself holds back no other shard's lost primary",
			newSnapshot(fsm.Active, 5, 1, formed, withDeleting("p0-0", true), withPod("p0-0", func(p *fsm.Pod) {
				p.Settings = map[string]string{"shutdown-on-sigterm": "failover"}
			}), withFailed("p1-0")),
			[]Action{CreatePod{Shard: 0}, CreatePod{Shard: 1}, FailoverForce{Pod: "p1-1", PrimaryID: "id-p1-0", Shard: 1}}, "waiting for the failover of shard 1"},
		{"the same whose process exited without handing over: FORCE",
			newSnapshot(fsm.Active, 3, 1, formed, withDeleting("p0-0", false), withPod("p0-0", func(p *fsm.Pod) {
				p.Settings = map[string]string{"shutdown-on-sigterm": "failover"}
			})),
			[]Action{CreatePod{Shard: 0}, force0}, waiting0},
		{"a deleting primary with only a Joining replica: no handover",
			newSnapshot(fsm.Active, 3, 1, formed, withDeleting("p0-0", true), withLifecycle("p0-1", v1.LifecycleJoining)),
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

func TestFailoverOnlyOnceFormed(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"))
	for _, st := range []fsm.State{fsm.Bootstrapping, fsm.Invalid} {
		s.State = st // never formed: no status.formedAt, the persisted state is the pass's
		for i := range s.Pods {
			s.Pods[i].Lifecycle = string(v1.LifecycleJoining) // and no node ever completed its join
		}
		if p := run(failover, st, s); len(p.Actions) != 0 {
			t.Fatalf("%s: %v", st, p.Actions)
		}
	}
}

// The intent is recorded with the pass that issues the failover, kept while the replica still
// follows the lost primary, and cleared once it is promoted.
func TestNextFailover(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"))
	s.Now = now
	got := NextFailover(s, Pass(fsm.Active, s))
	want := &fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: true, StartedAt: now}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("issued: got %+v, want %+v", got, want)
	}

	s.Failover, s.Now = want, now.Add(time.Second)
	if p := Pass(fsm.Active, s); len(p.Actions) != 1 || p.Waiting != "waiting for the failover of shard 0" {
		t.Fatalf("second pass: %v %q", p.Actions, p.Waiting)
	}
	if got := NextFailover(s, Pass(fsm.Active, s)); got != want {
		t.Fatalf("kept while p0-1 follows id-p0-0: %+v", got)
	}

	promoted := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withPod("p0-1", func(p *fsm.Pod) {
		p.Node.Primary, p.Node.PrimaryID = true, ""
	}))
	promoted.Failover, promoted.Now = want, now.Add(2*time.Second)
	if got := NextFailover(promoted, Pass(fsm.Active, promoted)); got != nil {
		t.Fatalf("not cleared once promoted: %+v", got)
	}
	if got := NextFailover(newSnapshot(fsm.Active, 3, 1, formed), Plan{}); got != nil {
		t.Fatalf("no intent from nothing: %+v", got)
	}
}

// A graceful failover (a roll's, a drain's) whose old primary's container died before it landed
// can never land: it does not hold back the FORCE that replaces the primary.
func TestGracefulIntentDoesNotHoldBackAfterTheCrash(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	intent := func(force bool) opt {
		return withIntent(fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Force: force}, now, time.Second)
	}
	s := newSnapshot(fsm.Upgrading, 3, 1, formed, withFailed("p0-0"), intent(false))
	p := run(failover, fsm.Upgrading, s)
	if len(p.Actions) != 1 || p.Actions[0] != (FailoverForce{Pod: "p0-1", PrimaryID: "id-p0-0", Shard: 0}) {
		t.Fatalf("want the FORCE at once, got %v (waiting %q)", p.Actions, p.Waiting)
	}
	s = newSnapshot(fsm.Upgrading, 3, 1, formed, withFailed("p0-0"), intent(true))
	if p := run(failover, fsm.Upgrading, s); len(p.Actions) != 0 {
		t.Fatalf("a FORCE issued 1 s ago is awaited, got %v", p.Actions)
	}
}

// slotsOf is shard's even share of the slots among shards.
func slotsOf(shard, shards int) slot.Set { return slot.Set{slot.EvenSpread(shards)[shard]} }

// A takeover is recorded as the intent of its pass, as a FORCE is.
func TestNextFailoverRecordsATakeover(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p0-0"), withPod("p1-0", func(p *fsm.Pod) { delete(p.Node.Follows, "id-p0-1") }))
	s.Now = now
	got := NextFailover(s, Pass(fsm.Active, s))
	want := &fsm.FailoverIntent{Shard: 0, Pod: "p0-1", PrimaryID: "id-p0-0", Takeover: true, StartedAt: now}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
