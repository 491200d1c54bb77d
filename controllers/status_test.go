package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
)

// formedSnapshot is a formed, synced shards×(replicas+1) cluster, every pod of spec hash "h":
// pods p<shard>-<i>, the first of each shard its primary.
func formedSnapshot(shards, replicas int) fsm.Snapshot {
	s := fsm.Snapshot{State: fsm.Active, Shards: shards, ReplicasPerShard: replicas, SpecHash: "h"}
	spread := slot.EvenSpread(shards)
	for sh := range shards {
		for i := range replicas + 1 {
			name := fmt.Sprintf("p%d-%d", sh, i)
			n := &fsm.Node{Reachable: true, ID: "id-" + name, ClusterStateOK: true, SlotsAssigned: slot.Count, Known: map[string]slot.Set{}}
			if i == 0 {
				n.Primary, n.MySlots = true, slot.Set{spread[sh]}
			} else {
				n.PrimaryID, n.LinkUp, n.ReplOffset = fmt.Sprintf("id-p%d-0", sh), true, 100
			}
			s.Pods = append(s.Pods, fsm.Pod{Name: name, Shard: sh, Phase: fsm.PodRunning, IP: fmt.Sprintf("10.0.%d.%d", sh, i), SpecHash: "h", Node: n})
		}
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
		}
	}
	return s
}

func TestBuildStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 40, 0, 0, time.UTC)
	lost := plan.Plan{Actions: []plan.Action{plan.AddSlots{Pod: "p1-0", Shard: 1, Slots: slot.EvenSpread(3)[1:2], Lost: true}}}
	cases := []struct {
		name     string
		state    fsm.State
		problem  string
		snap     func() fsm.Snapshot
		pl       plan.Plan
		ready    bool
		reason   string
		message  string // exact, or a prefix when it ends in "…"
		degraded bool
		readyN   int32
		requeue  time.Duration
	}{
		// Looked at again well before the tick: a node cut off while its pod runs changes nothing
		// a watch reports, and a quorum loss waits on the operator's next look.
		{name: "healthy", state: fsm.Active, snap: func() fsm.Snapshot { return formedSnapshot(3, 1) },
			ready: true, reason: ReasonReady, message: "", readyN: 6, requeue: healthyInterval},
		// Bookkeeping alone (here an annotation a webhook keeps taking off) is put back on the
		// healthy look, not every second.
		{name: "healthy, bookkeeping only", state: fsm.Active, snap: func() fsm.Snapshot { return formedSnapshot(3, 1) },
			pl:    plan.Plan{Actions: []plan.Action{plan.AnnotatePod{Pod: "p0-0", Keys: []string{"team"}}}},
			ready: true, reason: ReasonReady, message: "", readyN: 6, requeue: healthyInterval},
		{name: "replicas still syncing after formation", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(3, 1)
				s.Pods[1].Node.LinkUp, s.Pods[5].Node.LinkUp = false, false
				return s
			},
			reason: ReasonSyncing, message: "waiting for replicas to sync with their primaries: p0-1, p2-1", degraded: true, readyN: 4, requeue: waitInterval},
		{name: "forming", state: fsm.Forming,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(3, 1)
				s.Pods[0].Node.MySlots = nil
				s.Pods[0].Node.SlotsAssigned = 0
				return s
			},
			pl:     plan.Plan{Waiting: "waiting for slot assignment to propagate"},
			reason: "Forming", message: "waiting for slot assignment to propagate", readyN: 5, requeue: waitInterval},
		{name: "a node down on an Active cluster", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(3, 1)
				s.Pods[2].Phase, s.Pods[2].Node = fsm.PodFailed, &fsm.Node{Err: "connection refused"}
				return s
			},
			pl:     plan.Plan{Actions: []plan.Action{plan.CreatePod{Shard: 1}}, Waiting: "waiting for the cluster to agree"},
			reason: ReasonNotFormed, message: "waiting for the cluster to agree", degraded: true, readyN: 5, requeue: waitInterval},
		{name: "a lost primary's replica promoted: looked at again at once, to forget the lost id", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(3, 1)
				s.Pods[2].Phase, s.Pods[2].Node = fsm.PodFailed, &fsm.Node{Err: "connection refused"}
				return s
			},
			pl:     plan.Plan{Actions: []plan.Action{plan.CreatePod{Shard: 1}, plan.FailoverForce{Pod: "p1-1", PrimaryID: "n2", Shard: 1}}, Waiting: "waiting for the failover of shard 1"},
			reason: ReasonNotFormed, message: "waiting for the failover of shard 1", degraded: true, readyN: 5, requeue: promotedInterval},
		{name: "invalid", state: fsm.Invalid, problem: `ValkeyConfig "x" not found`,
			snap:   func() fsm.Snapshot { s := formedSnapshot(1, 0); s.SpecHash = ""; return s },
			reason: ReasonInvalid, message: `ValkeyConfig "x" not found`, readyN: 1, requeue: TickInterval},
		{name: "pods fail on start", state: fsm.Active,
			snap:   func() fsm.Snapshot { return formedSnapshot(1, 0) },
			pl:     plan.Plan{Blocked: "shard 0: pods a, b failed on start"},
			reason: ReasonFailingOnStart, message: "shard 0: pods a, b failed on start", degraded: true, readyN: 1, requeue: TickInterval},
		{name: "a rolling upgrade says what it waits for and looks again soon", state: fsm.Upgrading,
			snap:   func() fsm.Snapshot { s := formedSnapshot(1, 1); s.SpecHash = "new"; return s },
			pl:     plan.Plan{Waiting: "shard 0: waiting for an up-to-date replica to join"},
			reason: ReasonOutdated, message: "rolling upgrade: 2 of 2 nodes run an older spec (p0-0, p0-1); shard 0: waiting for an up-to-date replica to join", degraded: true, readyN: 2, requeue: waitInterval},
		{name: "Ready while cleaning up looks again soon", state: fsm.Active,
			snap:  func() fsm.Snapshot { return formedSnapshot(1, 1) },
			pl:    plan.Plan{Actions: []plan.Action{plan.DeletePod{Pod: "old"}}},
			ready: true, reason: ReasonReady, readyN: 2, requeue: waitInterval},
		// Valkey refused a live value, and the pass sets it again: the user must fix the
		// ValkeyConfig, so the cluster waits on the retries' back-off, not every second.
		{name: "a live value refused", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(1, 1)
				s.SettingsRefused = "Valkey refused the live settings maxmemory-policy=sometimes on pod p0-0 (and 1 more): ERR …; " + settingsRefusedFix
				return s
			},
			pl:     plan.Plan{Actions: []plan.Action{plan.SetConfig{Pod: "p0-0"}, plan.SetConfig{Pod: "p0-1"}}},
			reason: ReasonSettingsRefused, message: "Valkey refused the live settings maxmemory-policy=sometimes on pod p0-0 (and 1 more): ERR …", degraded: true, readyN: 2, requeue: waitInterval},
		{name: "a node's live settings unreadable", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(1, 1)
				for i := range s.Pods {
					s.Pods[i].Lifecycle = string(v1.LifecycleActive)
				}
				s.Pods[1].Node.ConfigErr = "config get on 10.0.0.2:6379: NOPERM User operator has no permissions to run the 'config|get' command"
				return s
			},
			reason: ReasonSettingsUnreadable, message: "live settings of pod p0-1 cannot be read (config get on 10.0.0.2:6379: NOPERM …", degraded: true, readyN: 2, requeue: TickInterval},
		{name: "a lost shard served again", state: fsm.Active,
			snap: func() fsm.Snapshot {
				s := formedSnapshot(3, 1)
				for _, i := range []int{2, 3} {
					s.Pods[i].Node.MySlots, s.Pods[i].Node.Primary, s.Pods[i].Node.PrimaryID, s.Pods[i].Node.LinkUp = nil, true, "", false
				}
				for i := range s.Pods {
					s.Pods[i].Node.SlotsAssigned = slot.Count - slot.EvenSpread(3)[1].Count()
				}
				return s
			},
			pl:     lost,
			reason: ReasonNotFormed, message: "waiting for the cluster to agree", degraded: true, readyN: 4, requeue: waitInterval},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev := &v1.ValkeyClusterStatus{State: c.state}
			st, h := buildStatus(prev, 7, c.state, c.problem, c.snap(), c.pl, now)
			if st.ObservedGeneration != 7 {
				t.Errorf("observedGeneration %d", st.ObservedGeneration)
			}
			if want, ok := strings.CutSuffix(c.message, "…"); ok {
				if !strings.HasPrefix(st.Message, want) {
					t.Errorf("message %q, want prefix %q", st.Message, want)
				}
			} else if st.Message != c.message {
				t.Errorf("message %q, want %q", st.Message, c.message)
			}
			ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady)
			if ready == nil || (ready.Status == metav1.ConditionTrue) != c.ready || ready.Reason != c.reason || ready.ObservedGeneration != 7 {
				t.Errorf("Ready condition %+v, want ready=%v reason %s", ready, c.ready, c.reason)
			}
			if !c.ready && ready.Message != st.Message {
				t.Errorf("Ready's message %q is not status.message %q", ready.Message, st.Message)
			}
			if got := meta.IsStatusConditionTrue(st.Conditions, v1.ConditionDegraded); got != c.degraded {
				t.Errorf("Degraded %v, want %v", got, c.degraded)
			}
			if st.ReadyNodes != c.readyN {
				t.Errorf("readyNodes %d, want %d", st.ReadyNodes, c.readyN)
			}
			if got := requeueAfter(h, c.pl); got != c.requeue {
				t.Errorf("requeue after %s, want %s", got, c.requeue)
			}
			lostCond := meta.FindStatusCondition(st.Conditions, v1.ConditionDataLost)
			if wantLost := lostMessage(c.pl, now) != ""; (lostCond != nil) != wantLost {
				t.Errorf("DataLost %+v, want it set: %v", lostCond, wantLost)
			}
		})
	}
}

// A shard served again empty sets DataLost, naming the shard, its slots and when; the condition
// stays (the record of the latest loss) on later passes that lose nothing, and Ready comes back.
func TestDataLostCondition(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 40, 0, 0, time.UTC)
	pl := plan.Plan{Actions: []plan.Action{
		plan.AddSlots{Pod: "p0-0", Shard: 0, Slots: slot.EvenSpread(2)[0:1], Lost: true},
		plan.AddSlots{Pod: "p1-0", Shard: 1, Slots: slot.EvenSpread(2)[1:2], Lost: true},
	}}
	st, _ := buildStatus(&v1.ValkeyClusterStatus{State: fsm.Active}, 1, fsm.Active, "", fsm.Snapshot{Shards: 2}, pl, now)
	c := meta.FindStatusCondition(st.Conditions, v1.ConditionDataLost)
	want := "shards 0 (slots 0-8191), 1 (slots 8192-16383) lost every copy of their data and were served again, empty, at 2026-12-01T09:40:00Z"
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonShardDataLost || c.Message != want {
		t.Fatalf("DataLost %+v, want message %q", c, want)
	}
	again, h := buildStatus(st, 1, fsm.Active, "", formedSnapshot(2, 0), plan.Plan{}, now.Add(time.Minute))
	if !h.Ready || again.Message != "" {
		t.Fatalf("re-formed: ready %v, message %q", h.Ready, again.Message)
	}
	if c := meta.FindStatusCondition(again.Conditions, v1.ConditionDataLost); c == nil || c.Message != want {
		t.Fatalf("DataLost not kept: %+v", c)
	}
	one := plan.Plan{Actions: pl.Actions[1:]}
	if got, want := lostMessage(one, now), "shard 1 (slots 8192-16383) lost every copy of its data and was served again, empty, at 2026-12-01T09:40:00Z"; got != want {
		t.Fatalf("one shard: %q, want %q", got, want)
	}
	// A first formation (Forming) loses nothing: its AddSlots are not Lost.
	first := plan.Plan{Actions: []plan.Action{plan.AddSlots{Pod: "p0-0", Shard: 0, Slots: slot.EvenSpread(1)}}}
	st, _ = buildStatus(&v1.ValkeyClusterStatus{}, 1, fsm.Forming, "", fsm.Snapshot{Shards: 1}, first, now)
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionDataLost); c != nil {
		t.Fatalf("DataLost on a first formation: %+v", c)
	}
}

// Writing the same status twice is no change: a steady cluster costs no API write per tick.
func TestBuildStatusIsStable(t *testing.T) {
	s := formedSnapshot(3, 1)
	st, _ := buildStatus(&v1.ValkeyClusterStatus{}, 1, fsm.Active, "", s, plan.Plan{}, time.Now())
	again, _ := buildStatus(st, 1, fsm.Active, "", s, plan.Plan{}, time.Now().Add(time.Hour))
	if !equalStatus(st, again) {
		t.Fatalf("status changed on an unchanged cluster:\n%+v\n%+v", st, again)
	}
}

// status.formedAt is written the first time the cluster is Active, never moved or cleared after
// (Invalid keeps it: that is what it is for), and written for a cluster found Active or
// Upgrading whose status an operator without the marker wrote. Bootstrapping and Forming do not
// write it.
func TestFormedAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 40, 0, 500, time.UTC)
	for _, st := range []fsm.State{fsm.Bootstrapping, fsm.Forming, fsm.Invalid} {
		if got, _ := buildStatus(&v1.ValkeyClusterStatus{}, 1, st, "", fsm.Snapshot{Shards: 1}, plan.Plan{}, now); got.FormedAt != nil {
			t.Errorf("%s: formedAt %v on a cluster never formed", st, got.FormedAt)
		}
	}
	formed, _ := buildStatus(&v1.ValkeyClusterStatus{State: fsm.Forming}, 1, fsm.Active, "", formedSnapshot(3, 1), plan.Plan{}, now)
	if formed.FormedAt == nil || !formed.FormedAt.Time.Equal(now.Truncate(time.Second)) {
		t.Fatalf("first Active: formedAt %v, want %s", formed.FormedAt, now.Truncate(time.Second))
	}
	invalid, _ := buildStatus(formed, 2, fsm.Invalid, `ValkeyConfig "x" not found`, fsm.Snapshot{Shards: 3}, plan.Plan{}, now.Add(time.Hour))
	if invalid.FormedAt == nil || !invalid.FormedAt.Equal(formed.FormedAt) {
		t.Fatalf("Invalid forgot or moved formedAt: %v, want %v", invalid.FormedAt, formed.FormedAt)
	}
	// A formed cluster that is Invalid is Degraded: nothing heals it meanwhile. One never
	// formed is not (it serves nothing yet).
	if c := meta.FindStatusCondition(invalid.Conditions, v1.ConditionDegraded); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalid ||
		c.Message != `ValkeyConfig "x" not found; `+invalidUnhealed {
		t.Fatalf("formed, then Invalid: Degraded %+v, want True, reason %s, the problem and what it stops", c, ReasonInvalid)
	}
	never, _ := buildStatus(&v1.ValkeyClusterStatus{}, 1, fsm.Invalid, `ValkeyConfig "x" not found`, fsm.Snapshot{Shards: 3}, plan.Plan{}, now)
	if c := meta.FindStatusCondition(never.Conditions, v1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalid {
		t.Fatalf("never formed, Invalid: Degraded %+v, want False, reason %s (not Ready)", c, ReasonInvalid)
	}
	again, _ := buildStatus(invalid, 2, fsm.Active, "", formedSnapshot(3, 1), plan.Plan{}, now.Add(2*time.Hour))
	if !again.FormedAt.Equal(formed.FormedAt) {
		t.Fatalf("back to Active moved formedAt: %v, want %v", again.FormedAt, formed.FormedAt)
	}
	// A status written before the marker existed: Active or Upgrading now, no formedAt.
	for _, st := range []fsm.State{fsm.Active, fsm.Upgrading} {
		got, _ := buildStatus(&v1.ValkeyClusterStatus{State: st}, 1, st, "", formedSnapshot(3, 1), plan.Plan{}, now)
		if got.FormedAt == nil {
			t.Errorf("%s without the marker: not marked on this pass", st)
		}
	}
}

// A Ready cluster is observed again within one cluster-node-timeout, so that a quorum lost to a
// cut network (no watch event) is taken over while the cut lasts (chaos seed 20261201: 15 s).
func TestHealthyIntervalIsNodeTimeout(t *testing.T) {
	if healthyInterval != time.Duration(resources.ClusterNodeTimeoutMS)*time.Millisecond || healthyInterval >= TickInterval {
		t.Fatalf("healthyInterval %s, want cluster-node-timeout (%d ms), below the tick (%s)", healthyInterval, resources.ClusterNodeTimeoutMS, TickInterval)
	}
}
