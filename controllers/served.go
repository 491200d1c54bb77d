package controllers

import (
	"sync"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
)

// servedSlots remembers, per cluster and pod, the last time a pass saw the pod's node serve slots
// or handed them away from it (fsm.Pod.ServedAt): the planners keep such a node a little longer
// before deleting it (plan.MovedHold). In memory only: an operator that has just started (a
// graceful handover of the lease takes well under the hold) knows nothing of what the previous
// one handed over, so its first pass of a cluster takes every node as serving then, and holds
// each retirement of the hold's kind once, for at most MovedHold.
//
// It also remembers the node id each pod's node last answered with, and gives it to a pod whose
// node does not answer and whose last status holds none (fsm.Pod.LastNodeID): status.nodes lists
// live pods only, so a pod whose container died loses its id from the status a pass later, and
// the dead planner (plan/dead.go) forgets a dead primary's id as soon as its slots are taken over
// only if it can tell whose it was. In memory only, like the rest: after a restart such an id is
// forgotten once Valkey flags it `fail` (plan/cleanup.go).
type servedSlots struct {
	mu   sync.Mutex
	at   map[string]map[string]time.Time
	ids  map[string]map[string]string
	seen map[string]bool // clusters observed since the operator started
}

// observe records the pods of s whose node serves slots as serving at s.Now, forgets the pods that
// are gone, and fills every pod's ServedAt.
func (t *servedSlots) observe(cluster string, s *fsm.Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]map[string]time.Time{}
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	first := !t.seen[cluster]
	t.seen[cluster] = true
	t.rememberIDs(cluster, s)
	old := t.at[cluster]
	cur := map[string]time.Time{}
	for i := range s.Pods {
		p := &s.Pods[i]
		if n := p.Node; n != nil && (first || n.Reachable && n.Primary && len(n.MySlots) > 0) {
			cur[p.Name] = s.Now
		} else if at, ok := old[p.Name]; ok {
			cur[p.Name] = at
		}
		p.ServedAt = cur[p.Name]
	}
	if len(cur) == 0 {
		delete(t.at, cluster)
		return
	}
	t.at[cluster] = cur
}

// rememberIDs records the id each answering pod's node gave and fills in the remembered one for
// the others that have none. Callers hold t.mu.
func (t *servedSlots) rememberIDs(cluster string, s *fsm.Snapshot) {
	if t.ids == nil {
		t.ids = map[string]map[string]string{}
	}
	old := t.ids[cluster]
	cur := map[string]string{}
	for i := range s.Pods {
		p := &s.Pods[i]
		switch n := p.Node; {
		case n != nil && n.Reachable && n.ID != "":
			cur[p.Name] = n.ID
		case p.LastNodeID != "":
			cur[p.Name] = p.LastNodeID
		case old[p.Name] != "":
			cur[p.Name], p.LastNodeID = old[p.Name], old[p.Name]
		}
	}
	if len(cur) == 0 {
		delete(t.ids, cluster)
		return
	}
	t.ids[cluster] = cur
}

// handedOver records that pod's node gave its slots away at when (a failover, a slot move).
func (t *servedSlots) handedOver(cluster, pod string, when time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]map[string]time.Time{}
	}
	if t.at[cluster] == nil {
		t.at[cluster] = map[string]time.Time{}
	}
	t.at[cluster][pod] = when
}

// forget drops a cluster that is gone.
func (t *servedSlots) forget(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.at, cluster)
	delete(t.ids, cluster)
	delete(t.seen, cluster)
}
