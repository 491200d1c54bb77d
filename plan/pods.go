package plan

// The pods planner (stability) keeps every shard at its pod count. Its rules, in order:
//
//  1. Create the missing pods of every shard: shards × (replicas + 1) live pods are wanted.
//     Creating a pod is harmless (a new node joins nobody until it is met), so every missing
//     pod is created in one pass.
//  2. Unless MaxFailedPerShard pods of the current spec already failed on start in that shard:
//     then the shard is blocked, and the pass with it, until the spec changes (another spec
//     hash) or the shard is whole again. Never more than MaxFailedPerShard pods of one spec
//     are tried in a shard, even when more are missing.
//
// It needs no node to answer: its gate is always open.

import (
	"fmt"
	"sort"
	"strings"

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
	var st Step
	for shard, live := range s.ShardPods() {
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
		for range min(missing, MaxFailedPerShard-len(failed)) {
			st.Actions = append(st.Actions, CreatePod{Shard: shard})
		}
	}
	return st
}

// failedOnStart names the shard's pods of the current spec that failed on start, by name.
func failedOnStart(s fsm.Snapshot, shard int) []string {
	var out []string
	for _, pod := range s.Pods {
		if pod.Shard == shard && pod.Phase == fsm.PodFailed && pod.StartFailure && !pod.Deleting && pod.SpecHash == s.SpecHash {
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
