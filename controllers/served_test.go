package controllers

import (
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

func servedSnapshot(now time.Time) *fsm.Snapshot {
	return &fsm.Snapshot{Now: now, Pods: []fsm.Pod{
		{Name: "primary", Node: &fsm.Node{Reachable: true, Primary: true, MySlots: slot.Set{{Start: 0, End: 16383}}}},
		{Name: "demoted", Node: &fsm.Node{Reachable: true}},
	}}
}

// A freshly started operator knows nothing of what the previous one handed over (a graceful
// lease handover takes well under plan.MovedHold): its first pass takes every pod as serving then,
// and later passes keep that time for the pods that no longer serve.
func TestServedAfterRestartHoldsEveryPodOnce(t *testing.T) {
	var tr servedSlots
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	s := servedSnapshot(t0)
	tr.observe("ns/c", s)
	for _, p := range s.Pods {
		if !p.ServedAt.Equal(t0) {
			t.Errorf("first pass: %s served at %v, want %v", p.Name, p.ServedAt, t0)
		}
	}
	t1 := t0.Add(10 * time.Second)
	s = servedSnapshot(t1)
	tr.observe("ns/c", s)
	if got := s.Pods[0].ServedAt; !got.Equal(t1) {
		t.Errorf("second pass: the primary served at %v, want %v", got, t1)
	}
	if got := s.Pods[1].ServedAt; !got.Equal(t0) {
		t.Errorf("second pass: the demoted node served at %v, want the first pass's %v", got, t0)
	}
	tr.forget("ns/c")
	t2 := t1.Add(time.Minute)
	s = servedSnapshot(t2)
	tr.observe("ns/c", s)
	if got := s.Pods[1].ServedAt; !got.Equal(t2) {
		t.Errorf("a cluster forgotten and seen again is new: the demoted node served at %v, want %v", got, t2)
	}
}

// A pod whose container died keeps, in this operator's memory, the node id its node last
// answered with, once the status (live pods only) no longer holds it: the dead planner needs it
// to forget a lost primary's id at once.
func TestServedRemembersNodeIDs(t *testing.T) {
	var s servedSlots
	alive := fsm.Snapshot{Now: time.Unix(100, 0), Pods: []fsm.Pod{{Name: "a", Phase: fsm.PodRunning, Node: &fsm.Node{Reachable: true, ID: "id-a"}}}}
	s.observe("ns/vc", &alive)
	dead := fsm.Snapshot{Now: time.Unix(101, 0), Pods: []fsm.Pod{{Name: "a", Phase: fsm.PodFailed}}}
	s.observe("ns/vc", &dead)
	if got := dead.Pods[0].LastNodeID; got != "id-a" {
		t.Fatalf("LastNodeID = %q, want id-a", got)
	}
	gone := fsm.Snapshot{Now: time.Unix(102, 0)}
	s.observe("ns/vc", &gone)
	again := fsm.Snapshot{Now: time.Unix(103, 0), Pods: []fsm.Pod{{Name: "a", Phase: fsm.PodFailed}}}
	s.observe("ns/vc", &again)
	if got := again.Pods[0].LastNodeID; got != "" {
		t.Fatalf("a pod gone from the snapshot is forgotten, got %q", got)
	}
}
