package plan

import (
	"fmt"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

// Fixtures: snapshots built from small options, as in package fsm's tests.

type opt func(*fsm.Snapshot)

// newSnapshot builds shards×(replicas+1) running pods named p<shard>-<i>, each node answering,
// a primary knowing only itself.
func newSnapshot(state fsm.State, shards, replicas int, opts ...opt) fsm.Snapshot {
	s := fsm.Snapshot{State: state, Shards: shards, ReplicasPerShard: replicas}
	for sh := range shards {
		for i := range replicas + 1 {
			name := fmt.Sprintf("p%d-%d", sh, i)
			s.Pods = append(s.Pods, fsm.Pod{Name: name, Shard: sh, Phase: fsm.PodRunning, IP: fmt.Sprintf("10.244.%d.%d", sh, i+2), Ready: true,
				Node: &fsm.Node{Reachable: true, ID: "id-" + name, Primary: true, Known: map[string]slot.Set{"id-" + name: nil}}})
		}
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// meshed: every node knows every node.
func meshed(s *fsm.Snapshot) {
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = nil
		}
	}
}

// formed: meshed, slots spread over the first pod of each shard, the others replicate it, synced
// (link up, a replication offset), cluster_state ok.
func formed(s *fsm.Snapshot) {
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
		p.Lifecycle = string(v1.LifecycleActive)
		p.LastNodeID = p.Node.ID
	}
	for i := range s.Pods {
		for j := range s.Pods {
			s.Pods[i].Node.Known[s.Pods[j].Node.ID] = s.Pods[j].Node.MySlots
			if r := s.Pods[j].Node; !r.Primary {
				if s.Pods[i].Node.Follows == nil {
					s.Pods[i].Node.Follows = map[string]string{}
				}
				s.Pods[i].Node.Follows[r.ID] = r.PrimaryID
			}
		}
	}
}

func withoutPods(s *fsm.Snapshot) { s.Pods = nil }

func withPod(name string, f func(*fsm.Pod)) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				f(&s.Pods[i])
			}
		}
	}
}

// withFailed: the pod's container is dead (pod Failed), its node unreachable.
func withFailed(name string) opt {
	return withPod(name, func(p *fsm.Pod) {
		p.Phase = fsm.PodFailed
		p.Node = &fsm.Node{Reachable: false, Err: "connection refused"}
	})
}

// withCut: the pod still runs but its network is cut: the operator cannot reach its node.
func withCut(name string) opt {
	return withPod(name, func(p *fsm.Pod) {
		p.Node = &fsm.Node{Reachable: false, Err: "i/o timeout"}
	})
}

// withFailFlag makes every reachable node's view flag id `fail`.
func withFailFlag(id string) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Reachable {
				if n.Failed == nil {
					n.Failed = map[string]bool{}
				}
				n.Failed[id] = true
			}
		}
	}
}

// withSuspectFlag makes every reachable node's view flag id `fail?`: too few primaries are left to
// agree on `fail`.
func withSuspectFlag(id string) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if n := s.Pods[i].Node; n != nil && n.Reachable {
				if n.Suspected == nil {
					n.Suspected = map[string]bool{}
				}
				n.Suspected[id] = true
			}
		}
	}
}

// withOffsets sets replication offsets by pod name.
func withOffsets(offsets map[string]int64) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if o, ok := offsets[s.Pods[i].Name]; ok && s.Pods[i].Node != nil {
				s.Pods[i].Node.ReplOffset = o
			}
		}
	}
}

// run runs one planner as the chain would, gate included.
func run(p Planner, st fsm.State, s fsm.Snapshot) Plan {
	return Chain{p}.Run(Input{State: st, Snapshot: s})
}

// withGone: the pod and its ValkeyNode are gone from the API (deleted, evicted).
func withGone(name string) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if s.Pods[i].Name == name {
				s.Pods = append(s.Pods[:i], s.Pods[i+1:]...)
				return
			}
		}
	}
}

// withDeleting: the pod has a deletion timestamp; its process still runs when running is true
// (its node answers as before), otherwise its container exited.
func withDeleting(name string, running bool) opt {
	return withPod(name, func(p *fsm.Pod) {
		p.Deleting = true
		if !running {
			p.Exited, p.Node = true, &fsm.Node{Reachable: false, Err: "connection refused"}
		}
	})
}

// withLifecycle sets the pod's ValkeyNode lifecycle.
func withLifecycle(name string, l v1.NodeLifecycle) opt {
	return withPod(name, func(p *fsm.Pod) { p.Lifecycle = string(l) })
}

// withIntent records a failover issued age ago, as status.failover says.
func withIntent(f fsm.FailoverIntent, now time.Time, age time.Duration) opt {
	return func(s *fsm.Snapshot) {
		f.StartedAt = now.Add(-age)
		s.Failover, s.Now = &f, now
	}
}

// steps are the actions of a pass without its bookkeeping (Upkeep): what the chain planned.
func steps(actions []Action) []Action {
	var out []Action
	for _, a := range actions {
		if !Upkeep(a) {
			out = append(out, a)
		}
	}
	return out
}

// agreeViews makes every reachable node's view of who replicates whom (fsm.Node.Follows) the
// nodes' own, as it is once gossip has settled.
func agreeViews(s *fsm.Snapshot) {
	for i := range s.Pods {
		n := s.Pods[i].Node
		if n == nil || !n.Reachable {
			continue
		}
		n.Follows = map[string]string{}
		for _, q := range s.Pods {
			if r := q.Node; r != nil && r.Reachable && r.ID != "" && !r.Primary && r.PrimaryID != "" {
				n.Follows[r.ID] = r.PrimaryID
			}
		}
	}
}
