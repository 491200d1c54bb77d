package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
)

func TestPods(t *testing.T) {
	cases := []struct {
		name    string
		st      fsm.State
		s       fsm.Snapshot
		want    []Action
		blocked string
	}{
		{"bootstrap creates every pod", fsm.Bootstrapping, newSnapshot(fsm.Bootstrapping, 3, 1, withoutPods),
			[]Action{CreatePod{Shard: 0}, CreatePod{Shard: 0}, CreatePod{Shard: 1}, CreatePod{Shard: 1}, CreatePod{Shard: 2}, CreatePod{Shard: 2}}, ""},
		{"whole cluster creates nothing", fsm.Active, newSnapshot(fsm.Active, 3, 1, formed), nil, ""},
		{"a failed pod is replaced", fsm.Active, newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-1")),
			[]Action{CreatePod{Shard: 1}}, ""},
		{"a deleting pod is replaced", fsm.Active, newSnapshot(fsm.Active, 2, 1, formed, withPod("p0-0", func(p *fsm.Pod) { p.Deleting = true })),
			[]Action{CreatePod{Shard: 0}}, ""},
		{"a cut pod still runs: nothing to create", fsm.Active, newSnapshot(fsm.Active, 3, 1, formed, withCut("p0-0")), nil, ""},
		{"replicas scaled up: one node at a time, in the first shard", fsm.Active, grown(newSnapshot(fsm.Active, 3, 1, formed), 2),
			[]Action{CreatePod{Shard: 0}}, ""},
		{"replicas scaled up: the shard with the fewest nodes next", fsm.Active,
			grown(newSnapshot(fsm.Active, 3, 1, formed, withReplica("p0-7", 0, true)), 2), []Action{CreatePod{Shard: 1}}, ""},
		{"replicas scaled up: nothing while a node is joining", fsm.Active,
			grown(newSnapshot(fsm.Active, 3, 1, formed, withReplica("p0-7", 0, false)), 2), nil, ""},
		{"replicas scaled up while a pod died: the dead one is replaced at once", fsm.Active,
			grown(newSnapshot(fsm.Active, 3, 1, formed, withReplica("p0-7", 0, false), withFailed("p2-1")), 2), []Action{CreatePod{Shard: 2}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := run(pods, c.st, c.s)
			if !reflect.DeepEqual(p.Actions, c.want) || p.Blocked != c.blocked {
				t.Fatalf("got %v %q, want %v %q", p.Actions, p.Blocked, c.want, c.blocked)
			}
		})
	}
}

// grown: the spec now asks for replicas per shard.
func grown(s fsm.Snapshot, replicas int) fsm.Snapshot {
	s.ReplicasPerShard = replicas
	return s
}

// Pods that fail on start are not replaced without end.
func TestCrashingPodsStopReplacement(t *testing.T) {
	s := newSnapshot(fsm.Bootstrapping, 1, 0, withoutPods)
	s.SpecHash = "h1"
	for _, name := range []string{"p0-a", "p0-b"} {
		s.Pods = append(s.Pods, fsm.Pod{Name: name, Shard: 0, Phase: fsm.PodFailed, SpecHash: "h1", Failure: "Error, exit code 1", StartFailure: true})
	}
	p := Pass(fsm.Bootstrapping, s)
	if len(p.Actions) != 0 || p.Blocked != "shard 0: pods p0-a, p0-b failed on start (Error, exit code 1); not creating more until the spec changes" {
		t.Fatalf("%v %q", p.Actions, p.Blocked)
	}
	s.StartHash = "live2" // a live setting Valkey refused at start was fixed: same SpecHash
	if p := Pass(fsm.Bootstrapping, s); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 0}}) || p.Blocked != "" {
		t.Fatalf("after a live setting was fixed: %v %q", p.Actions, p.Blocked)
	}
	s.StartHash = ""
	s.SpecHash = "h2" // the config was fixed
	if p := Pass(fsm.Bootstrapping, s); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 0}}) || p.Blocked != "" {
		t.Fatalf("after a spec change: %v %q", p.Actions, p.Blocked)
	}
	// Nodes killed by a signal (a lost shard) are not start failures: replace them.
	killed := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-0"), withFailed("p1-1"))
	if p := Pass(fsm.Active, killed); p.Blocked != "" || !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 1}, CreatePod{Shard: 1}}) {
		t.Fatalf("lost shard: %v %q", p.Actions, p.Blocked)
	}
	// At most MaxFailedPerShard pods of one spec are tried in a shard, even when more are missing.
	two := newSnapshot(fsm.Bootstrapping, 1, 4, withoutPods)
	two.Pods = append(two.Pods, fsm.Pod{Name: "x", Shard: 0, Phase: fsm.PodFailed, StartFailure: true})
	if p := Pass(fsm.Bootstrapping, two); !reflect.DeepEqual(p.Actions, []Action{CreatePod{Shard: 0}}) {
		t.Fatalf("want %d creations, got %v", MaxFailedPerShard-1, p.Actions)
	}
	// The block names the pods and stops the pass: nothing else moves until the spec is fixed.
	if p := run(pods, fsm.Bootstrapping, s); p.Blocked != "" {
		t.Fatalf("h2 is not blocked: %q", p.Blocked)
	}
	s.SpecHash = "h1"
	if p := Pass(fsm.Bootstrapping, s); !strings.Contains(p.Blocked, "p0-a, p0-b") || p.Waiting != "" {
		t.Fatalf("blocked pass: %q %q", p.Blocked, p.Waiting)
	}
}

// While the back-off after a refused pod runs, the pods planner creates nothing and says why; the
// later planners go on (a shard whose primary died still fails over).
func TestPodsHeldAfterARefusal(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withFailed("p1-0"), withOffsets(map[string]int64{"p1-1": 500}))
	s.CreateRefused, s.CreateHeld = "pod vc-1 could not be created: exceeded quota; retrying in 4s", true
	p := Pass(fsm.Active, s)
	for _, a := range p.Actions {
		if _, ok := a.(CreatePod); ok {
			t.Fatalf("created a pod while held: %v", p.Actions)
		}
	}
	if _, ok := p.Disruptive().(FailoverForce); !ok {
		t.Fatalf("the failover of shard 1 waited on the held creation: %v (waiting %q)", p.Actions, p.Waiting)
	}
	s.CreateHeld = false
	if p := run(pods, fsm.Active, s); len(p.Actions) != 1 {
		t.Fatalf("back-off over: planned %v, want the replacement", p.Actions)
	}
}
