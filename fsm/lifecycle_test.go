package fsm

import (
	"slices"
	"testing"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/slot"
)

// lcPod is a running pod of shard with a ValkeyNode in lifecycle lc and the given node view.
func lcPod(name string, shard int, lc v1.NodeLifecycle, n *Node) Pod {
	return Pod{Name: name, Shard: shard, Phase: PodRunning, IP: "10.0.0.1", Lifecycle: string(lc), Node: n}
}

func primaryNode(id string, slots bool) *Node {
	n := &Node{Reachable: true, ID: id, ClusterStateOK: true, SlotsAssigned: slot.Count, Primary: true}
	if slots {
		n.MySlots = slot.Set{{Start: 0, End: 100}}
	}
	return n
}

func replicaNode(id, primary string, linkUp bool) *Node {
	return &Node{Reachable: true, ID: id, ClusterStateOK: true, SlotsAssigned: slot.Count, PrimaryID: primary, LinkUp: linkUp}
}

func TestCompletedJoins(t *testing.T) {
	down := replicaNode("r", "p", true)
	down.ClusterStateOK = false
	failed := lcPod("failed", 0, v1.LifecycleJoining, replicaNode("f", "p", true))
	failed.Phase = PodFailed
	deleting := lcPod("deleting", 0, v1.LifecycleJoining, replicaNode("d", "p", true))
	deleting.Deleting = true
	// cluster-require-full-coverage no: cluster_state ok while slots are still unassigned.
	partial := primaryNode("a", true)
	partial.SlotsAssigned = 8192
	tests := []struct {
		name string
		pod  Pod
		want bool
	}{
		{"a primary serving slots", lcPod("a", 0, v1.LifecycleJoining, primaryNode("a", true)), true},
		{"a primary without slots yet", lcPod("a", 0, v1.LifecycleJoining, primaryNode("a", false)), false},
		{"a replica whose link is up", lcPod("a", 0, v1.LifecycleJoining, replicaNode("a", "p", true)), true},
		{"a replica still syncing", lcPod("a", 0, v1.LifecycleJoining, replicaNode("a", "p", false)), false},
		{"a node not attached to anything", lcPod("a", 0, v1.LifecycleJoining, &Node{Reachable: true, ID: "a", ClusterStateOK: true}), false},
		{"a node that does not answer", lcPod("a", 0, v1.LifecycleJoining, &Node{Reachable: false}), false},
		{"a node not queried", lcPod("a", 0, v1.LifecycleJoining, nil), false},
		{"a node whose cluster is down", lcPod("a", 0, v1.LifecycleJoining, down), false},
		{"a primary whose cluster serves only some slots (full coverage not required)", lcPod("a", 0, v1.LifecycleJoining, partial), false},
		{"already Active", lcPod("a", 0, v1.LifecycleActive, primaryNode("a", true)), false},
		{"Leaving", lcPod("a", 0, v1.LifecycleLeaving, primaryNode("a", true)), false},
		{"a pod without a ValkeyNode", lcPod("a", 0, "", primaryNode("a", true)), false},
		{"a Failed pod", failed, false},
		{"a deleting pod", deleting, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CompletedJoins(Snapshot{Shards: 1, ReplicasPerShard: 1, Pods: []Pod{tc.pod}})
			if want := map[bool][]string{true: {tc.pod.Name}}[tc.want]; !slices.Equal(got, want) {
				t.Fatalf("CompletedJoins = %v, want %v", got, want)
			}
		})
	}
}

func TestJoinType(t *testing.T) {
	primary := lcPod("p", 0, v1.LifecycleActive, primaryNode("p", true))
	lost := Pod{Name: "lost", Shard: 0, Phase: PodFailed}
	orphanReplica := lcPod("r", 0, v1.LifecycleActive, replicaNode("r", "gone", true))
	other := lcPod("o", 1, v1.LifecycleActive, primaryNode("o", true))
	tests := []struct {
		name  string
		state State
		pods  []Pod
		shard int
		want  v1.JoinType
	}{
		{"a new cluster's nodes are founding members", Initial, nil, 0, ""},
		{"a pod lost while bootstrapping is replaced by a founding member", Bootstrapping, []Pod{lost}, 0, ""},
		{"still Forming", Forming, []Pod{primary, lost}, 0, ""},
		{"a replica lost beside a serving primary", Active, []Pod{primary, lost, other}, 0, v1.JoinTypeReplica},
		{"a primary lost, its replica not yet promoted", Active, []Pod{orphanReplica, lost, other}, 0, v1.JoinTypePrimary},
		{"every node of the shard lost", Active, []Pod{lost, other}, 0, v1.JoinTypePrimary},
		{"a shard the cluster never had", Active, []Pod{primary, other}, 2, v1.JoinTypeShard},
		{"while Upgrading", Upgrading, []Pod{primary, lost, other}, 0, v1.JoinTypeReplica},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{State: tc.state, Shards: 3, ReplicasPerShard: 1, Pods: tc.pods}
			if got := JoinType(s, tc.shard); got != tc.want {
				t.Fatalf("JoinType = %q, want %q", got, tc.want)
			}
		})
	}
}

// A node created as a cluster formed once comes back from Invalid replaces a lost one: it gets a
// join type, as it would have had the pods died while the cluster was Active.
func TestJoinTypeAfterInvalid(t *testing.T) {
	lost := Pod{Name: "lost", Shard: 0, Phase: PodFailed}
	other := lcPod("o", 1, v1.LifecycleJoining, primaryNode("o", true))
	s := Snapshot{State: Invalid, Shards: 2, ReplicasPerShard: 1, Pods: []Pod{lost, other}}
	if got := JoinType(s, 0); got != "" {
		t.Fatalf("never formed: JoinType = %q, want none", got)
	}
	s.FormedAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if got := JoinType(s, 0); got != v1.JoinTypePrimary {
		t.Fatalf("formed once, every node of the shard lost: JoinType = %q, want %q", got, v1.JoinTypePrimary)
	}
}

// A cluster that announces hostnames (TLS) is formed, and a node has joined it, only once every
// live node knows every live peer's hostname: one that lacks it answers MOVED with "?" for an
// address. A gap about a node that is gone, or in a cluster that announces none, holds nothing.
func TestHostnamesGateFormationAndJoins(t *testing.T) {
	s := newSnapshot(Active, 2, 1, formed)
	s.Hostnames = true
	if !s.Formed() || s.HostnameGap("") != "" {
		t.Fatalf("every hostname known: want formed, got gap %q", s.HostnameGap(""))
	}
	s.Pods[1].Lifecycle = string(v1.LifecycleJoining) // p0-1, a replica that just synced
	if got := CompletedJoins(s); !slices.Equal(got, []string{"p0-1"}) {
		t.Fatalf("every hostname known: want p0-1's join complete, got %v", got)
	}
	s.Pods[2].Node.NoHostname = map[string]bool{"id-p0-1": true} // p1-0 lacks p0-1's hostname
	if s.Formed() {
		t.Fatal("p1-0 does not know p0-1's hostname: want not formed")
	}
	if gap := s.HostnameGap("p0-1"); gap != "p1-0 does not know p0-1's hostname yet" {
		t.Fatalf("gap involving p0-1: %q", gap)
	}
	if gap := s.HostnameGap("p1-1"); gap != "" {
		t.Fatalf("no gap involves p1-1, got %q", gap)
	}
	if got := CompletedJoins(s); len(got) != 0 {
		t.Fatalf("p0-1 is not known by hostname everywhere: want its join held, got %v", got)
	}
	s.Pods[2].Node.NoHostname = map[string]bool{"id-gone": true}
	if !s.Formed() {
		t.Fatal("a gap about a node that is gone: want formed")
	}
	s.Pods[2].Node.NoHostname = map[string]bool{"id-p0-1": true}
	s.Hostnames = false
	if !s.Formed() || len(CompletedJoins(s)) != 1 {
		t.Fatal("a cluster that announces no hostname: want formed and the join complete")
	}
}

// A replica being retired (Leaving) was detached from its primary on purpose: it is not waited for.
func TestUnsyncedSkipsLeaving(t *testing.T) {
	s := newSnapshot(Active, 1, 1, formed)
	s.Pods[1].Node.LinkUp = false
	if got := s.Unsynced(); !slices.Equal(got, []string{"p0-1"}) {
		t.Fatalf("a replica with its link down: Unsynced = %v", got)
	}
	s.Pods[1].Lifecycle = string(v1.LifecycleLeaving)
	if got := s.Unsynced(); len(got) != 0 {
		t.Fatalf("a Leaving replica: Unsynced = %v, want none", got)
	}
}

// Unformed names what keeps a cluster from agreeing, the first finding in its order; a stranger
// node met from outside is named by its id, so that a team can forget it.
func TestUnformedSaysWhy(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Snapshot)
		want string
	}{
		{"formed", func(*Snapshot) {}, ""},
		{"a shard short of a pod", func(s *Snapshot) { s.Pods = s.Pods[:3] }, "shard 1 has 1 of its 2 pods"},
		{"a pod not running", func(s *Snapshot) { s.Pods[1].Phase = PodPending }, "pod p0-1 does not run yet"},
		{"a node that does not answer", func(s *Snapshot) { s.Pods[2].Node.Reachable = false }, "the node of pod p1-0 does not answer"},
		{"slots unassigned", func(s *Snapshot) { s.Pods[0].Node.SlotsAssigned = 8192 }, "pod p0-0 sees 8192 of 16384 slots assigned"},
		{"a node missing from a view", func(s *Snapshot) { delete(s.Pods[3].Node.Known, "id-p0-0") }, "pod p1-1 does not know pod p0-0's node id-p0-0"},
		{"a stranger in a view", func(s *Snapshot) { s.Pods[1].Node.Known["e0f1"] = nil }, "pod p0-1 knows node e0f1, which no pod of the cluster runs (gone, or met from outside)"},
		{"a replica of another primary", func(s *Snapshot) { s.Pods[3].Node.PrimaryID = "id-p0-0" }, "pod p1-1 is not a replica of shard 1's primary p1-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(Active, 2, 1, formed)
			tc.edit(&s)
			if got := s.Unformed(); got != tc.want {
				t.Fatalf("Unformed = %q, want %q", got, tc.want)
			}
			if s.Formed() != (tc.want == "") {
				t.Fatalf("Formed = %t with Unformed %q", s.Formed(), tc.want)
			}
		})
	}
}
