package plan

// The pods planner (stability) keeps every shard at its pod count. Its rules, in order:
//
//  1. Create the missing pods of every shard: shards × (replicas + 1) live pods are wanted.
//     Creating a pod is harmless (a new node joins nobody until it is met), so a new cluster's
//     pods, and the replacements of dead pods (Failed, lost, gone: their record is still
//     there), are all created in one pass.
//  2. Growth of a formed cluster (replicasPerShard raised, a new shard) is gradual, as the docs
//     describe replica scaling: one node at a time for the whole cluster, only while no other
//     node is Joining (syncing from its primary; a new shard's empty primary does not count), in
//     the shard with the fewest live pods, then the first by index, so shards grow evenly.
//  3. Unless MaxFailedPerShard pods of the current spec already failed on start in that shard:
//     then the shard is blocked, and the pass with it, until the spec changes (another spec
//     hash) or the shard is whole again. Never more than MaxFailedPerShard pods of one spec
//     are tried in a shard, even when more are missing.
//
//  4. A new pod avoids the zones of its shard's live copies when a zone of the cluster holds none
//     (CreatePod.Avoid): required under zoneSpread required, preferred otherwise. The scheduler's
//     own per-shard spread still counts a copy lost with its Kubernetes node, which would let the
//     replacement join the surviving copy's zone.
//  5. While the back-off after a refused pod creation runs (fsm.Snapshot.CreateHeld), nothing
//     is created: the refusal is reported (a hold), and the later planners go on, so a shard
//     still fails over while its replacement cannot be created.
//
// It needs no node to answer: its gate is always open.

import (
	"fmt"
	"sort"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// MaxFailedPerShard is how many pods of the current spec may fail in one shard before the
// operator stops creating replacements for it: a pod that fails on start (a bad directive in the
// ValkeyConfig) would otherwise be replaced every pass, without end. A new spec (another spec
// hash) or the shard becoming whole again lifts the stop.
const MaxFailedPerShard = 2

var pods = Planner{Name: "pods", Plan: planPods}

func planPods(in Input) Step {
	s := in.Snapshot
	if s.CreateHeld {
		return Step{Hold: s.CreateRefused}
	}
	var st Step
	gradual := formedOnce(in)
	grow, growLive := -1, 0
	shardPods := s.ShardPods()
	for shard, live := range shardPods {
		missing := s.ReplicasPerShard + 1 - len(live)
		if missing <= 0 {
			continue
		}
		failed := failedOnStart(s, shard)
		if len(failed) >= MaxFailedPerShard {
			st.Blocked = fmt.Sprintf("shard %d: pods %s failed on start (%s); not creating more until the spec changes",
				shard, strings.Join(failed, ", "), failureOf(s, failed[len(failed)-1]))
			continue
		}
		n := min(missing, MaxFailedPerShard-len(failed))
		if gradual {
			if dead := deadRecords(s, shard); n > dead {
				if grow < 0 || len(live) < growLive {
					grow, growLive = shard, len(live)
				}
				n = dead
			}
		}
		for range n {
			st.Actions = append(st.Actions, CreatePod{Shard: shard, Avoid: avoidZones(s.Zones, live)})
		}
	}
	if grow >= 0 && len(st.Actions) == 0 && !anyJoining(s) {
		st.Actions = append(st.Actions, CreatePod{Shard: grow, Avoid: avoidZones(s.Zones, shardPods[grow])})
	}
	return st
}

// deadRecords counts the shard's pods that died or are going and are not replaced yet: Failed or
// Succeeded, gone from the API (their ValkeyNode remains), lost with their Kubernetes node, or
// being deleted (a drain). The operator's own retirements never leave a shard short, so a
// deleting pod in a shard below its count is a loss to replace at once.
func deadRecords(s fsm.Snapshot, shard int) int {
	n := 0
	for _, p := range s.Pods {
		if p.Shard == shard && (p.Deleting || p.Phase == fsm.PodFailed || p.Phase == fsm.PodSucceeded || p.Lost()) {
			n++
		}
	}
	return n
}

// anyJoining reports whether a live node has not completed its join yet. The primary of a new
// shard does not count: it completes its join only once slots move into it, and slots move in
// only once its shard has its replicas (reshard rule 3), so waiting for it would stop the shard
// from ever growing.
func anyJoining(s fsm.Snapshot) bool {
	shards := s.ShardPods()
	for _, p := range s.LivePods() {
		if p.Lifecycle != string(v1.LifecycleJoining) {
			continue
		}
		if p.Shard >= 0 && p.Shard < s.Shards && freshShard(shards[p.Shard]) {
			continue
		}
		return true
	}
	return false
}

// failedOnStart names the shard's pods of the current spec that failed on start, by name. The
// current spec includes the live settings (fsm.Pod.StartHash): a value Valkey refused at start
// that the spec then fixes lets new pods be created again.
func failedOnStart(s fsm.Snapshot, shard int) []string {
	var out []string
	for _, pod := range s.Pods {
		if pod.Shard == shard && pod.Phase == fsm.PodFailed && pod.StartFailure && !pod.Deleting && pod.SpecHash == s.SpecHash && pod.StartHash == s.StartHash {
			out = append(out, pod.Name)
		}
	}
	sort.Strings(out)
	return out
}

func failureOf(s fsm.Snapshot, name string) string {
	for _, pod := range s.Pods {
		if pod.Name == name {
			return pod.Failure
		}
	}
	return ""
}
