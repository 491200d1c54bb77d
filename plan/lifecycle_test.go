package plan

import (
	"slices"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/slot"
)

func lcPod(name string, shard int, lc v1.NodeLifecycle, n *fsm.Node) fsm.Pod {
	return fsm.Pod{Name: name, Shard: shard, Phase: fsm.PodRunning, IP: "10.0.0.1", Lifecycle: string(lc), Node: n}
}

// A ValkeyNode whose pod is missing is seen as a Failed pod: it is replaced at once and, once
// its shard is whole and synced, retired with the other dead pods.
func TestLostNodeIsReplacedThenRetired(t *testing.T) {
	all := slot.Set{{Start: 0, End: slot.Count - 1}}
	p := lcPod("p", 0, v1.LifecycleActive, &fsm.Node{Reachable: true, ID: "p", ClusterStateOK: true, Primary: true, MySlots: all, SlotsAssigned: slot.Count})
	p.Node.Known = map[string]slot.Set{"p": all}
	lost := fsm.Pod{Name: "lost", Shard: 0, Phase: fsm.PodFailed, Failure: "pod missing", Lifecycle: string(v1.LifecycleActive)}
	s := fsm.Snapshot{State: fsm.Active, Shards: 1, ReplicasPerShard: 1, Pods: []fsm.Pod{lost, p}}
	got := Pass(fsm.Active, s)
	if len(got.Actions) == 0 || got.Actions[0] != (CreatePod{Shard: 0}) {
		t.Fatalf("plan for a shard with a lost node: %+v", got)
	}
	r := lcPod("r", 0, v1.LifecycleJoining, &fsm.Node{Reachable: true, ID: "r", ClusterStateOK: true, PrimaryID: "p", LinkUp: true, ReplOffset: 10, SlotsAssigned: slot.Count})
	p.Node.Known = map[string]slot.Set{"p": all, "r": nil}
	r.Node.Known = p.Node.Known
	s.Pods = []fsm.Pod{lost, p, r}
	got = Pass(fsm.Active, s)
	if !slices.ContainsFunc(got.Actions, func(a Action) bool { return a == DeletePod{Pod: "lost"} }) {
		t.Fatalf("plan once the shard is whole again: %+v", got)
	}
}
