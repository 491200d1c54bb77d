package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
)

var (
	small = fsm.Size{CPU: "500m", Memory: "256Mi"}
	big   = fsm.Size{CPU: "500m", Memory: "512Mi"}
)

// sized: the spec asks for want (shape "shape", data volume bound 1088Mi needed for 512Mi), every
// node was built at have, its pod asks for asked and runs inForce, a 1088Mi data volume; each
// node's spec hash is current only when have is want.
func sized(want, have, asked, inForce fsm.Size) opt {
	return func(s *fsm.Snapshot) {
		s.SpecHash, s.ShapeHash, s.Size, s.DataLimit = "h-"+want.Memory, "shape", want, 1088<<20
		s.Now = time.Unix(1000, 0)
		for i := range s.Pods {
			p := &s.Pods[i]
			p.SpecHash, p.ShapeHash, p.Size = "h-"+have.Memory, "shape", have
			p.Resize = &fsm.Resize{Asked: asked, InForce: inForce, DataLimit: 1088 << 20}
			p.Node.UsedMemoryRSS = 20 << 20
			p.Node.Config = map[string]string{"maxmemory": "104857600"}
		}
	}
}

func TestPlanResize(t *testing.T) {
	all := func(a func(pod string) Action) []Action {
		var out []Action
		for _, p := range []string{"p0-0", "p0-1", "p1-0", "p1-1"} {
			out = append(out, a(p))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		opts  []opt
		want  []Action
		holds string // a substring of the step's hold, "" for none
	}{
		{name: "current: nothing", opts: []opt{formed, sized(small, small, small, small)}},
		{name: "grow: every pod in one pass", opts: []opt{formed, sized(big, small, small, small)},
			want: all(func(p string) Action { return ResizePod{Pod: p, To: big, From: small} })},
		{name: "asked, not applied yet: wait", opts: []opt{formed, sized(big, small, big, small)}, holds: "resizing pod p0-0 in place"},
		{name: "asked and applied: record", opts: []opt{formed, sized(big, small, big, big)},
			want: all(func(p string) Action { return RecordSize{Pod: p, Size: big} })},
		{name: "the kubelet's error is said", opts: []opt{formed, sized(big, small, big, small), withPod("p1-0", func(p *fsm.Pod) { p.Resize.Error = "cannot decrease" })},
			holds: "pod p1-0: the kubelet has not applied the resize: cannot decrease"},
		{name: "shrink: waits for maxmemory first", opts: []opt{formed, sized(small, big, big, big), withMaxmemory("50mb")}, holds: "waiting for maxmemory 50mb"},
		{name: "shrink: once maxmemory runs", opts: []opt{formed, sized(small, big, big, big), withMaxmemory("100mb")},
			want: all(func(p string) Action { return ResizePod{Pod: p, To: small, From: big} })},
		{name: "shrink below what a shard holds: its nodes refused, the others shrunk", opts: []opt{formed, sized(small, big, big, big), withMaxmemory("100mb"),
			withPod("p0-1", func(p *fsm.Pod) { p.Node.UsedMemoryRSS = 230 << 20 })},
			want:  []Action{ResizePod{Pod: "p1-0", To: small, From: big}, ResizePod{Pod: "p1-1", To: small, From: big}},
			holds: "pod p0-0: shrinking memory to 256Mi refused: its shard's nodes hold up to 230 MiB"},
		{name: "shrink below maxmemory: refused", opts: []opt{formed, sized(small, big, big, big), withMaxmemory("300mb")}, holds: "maxmemory 300mb does not fit"},
		{name: "infeasible: not resized (the roll takes it)", opts: []opt{formed, sized(big, small, big, small), withResize(func(r *fsm.Resize) { r.Pending, r.PendingMessage = "Infeasible", "static memory manager" })}},
		{name: "deferred within the bound: waits", opts: []opt{formed, sized(big, small, big, small), withResize(func(r *fsm.Resize) {
			r.Pending, r.PendingMessage, r.PendingSince = "Deferred", "Node didn't have enough resource", time.Unix(1000, 0).Add(-time.Minute)
		})}, holds: "the kubelet deferred the resize"},
		{name: "deferred past the bound: not resized", opts: []opt{formed, sized(big, small, big, small), withResize(func(r *fsm.Resize) {
			r.Pending, r.PendingSince = "Deferred", time.Unix(1000, 0).Add(-fsm.ResizeDeferBound-time.Second)
		})}},
		{name: "refused by the API server: not resized", opts: []opt{formed, sized(big, small, small, small), withResize(func(r *fsm.Resize) { r.Refused = "NodeCapacity" })}},
		{name: "a kubelet without resize: not resized", opts: []opt{formed, sized(big, small, small, small), withResize(nil)}},
		{name: "a grow past the data volume: not resized", opts: []opt{formed, sized(big, small, small, small), withResize(func(r *fsm.Resize) { r.DataLimit = 576 << 20 })}},
		{name: "the spec went back before the record: resized back", opts: []opt{formed, sized(small, small, big, big), withMaxmemory("100mb")},
			want: all(func(p string) Action { return ResizePod{Pod: p, To: small, From: big} })},
		{name: "back, applied: nothing to record", opts: []opt{formed, sized(small, small, small, small), withPod("p0-0", func(p *fsm.Pod) { p.Resize.InForce = small })}},
		{name: "another shape: the roll's", opts: []opt{formed, sized(big, small, small, small), withPod("p0-0", func(p *fsm.Pod) { p.ShapeHash = "old" })},
			want: []Action{ResizePod{Pod: "p0-1", To: big, From: small}, ResizePod{Pod: "p1-0", To: big, From: small}, ResizePod{Pod: "p1-1", To: big, From: small}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(fsm.Active, 2, 1, tc.opts...)
			got := run(resize, fsm.Active, s)
			if !reflect.DeepEqual(got.Actions, tc.want) {
				t.Errorf("actions %v, want %v", got.Actions, tc.want)
			}
			if hold := strings.Join(got.Holds, "; "); (tc.holds == "") != (hold == "") || !strings.Contains(hold, tc.holds) {
				t.Errorf("holds %q, want one saying %q", hold, tc.holds)
			}
		})
	}
}

// withMaxmemory: the spec wants maxmemory v.
func withMaxmemory(v string) opt {
	return func(s *fsm.Snapshot) { s.Settings = map[string]string{"maxmemory": v} }
}

// withResize changes every pod's Resize (nil: none reported).
func withResize(f func(*fsm.Resize)) opt {
	return func(s *fsm.Snapshot) {
		for i := range s.Pods {
			if f == nil {
				s.Pods[i].Resize = nil
				continue
			}
			f(s.Pods[i].Resize)
		}
	}
}

// TestResizeOrRoll: a node InPlace refuses is outdated (the upgrade planner replaces it), one it
// allows is not; the settings planner holds maxmemory on a node still to grow.
func TestResizeOrRoll(t *testing.T) {
	s := newSnapshot(fsm.Active, 1, 1, formed, sized(big, small, small, small))
	if out := s.Outdated(); len(out) != 0 {
		t.Fatalf("outdated %v: a node to resize in place is not replaced", out)
	}
	if !HoldsMaxmemory(s, s.Pods[0]) {
		t.Fatal("maxmemory not held on a node still to grow")
	}
	s = newSnapshot(fsm.Active, 1, 1, formed, sized(big, small, small, small), withResize(nil))
	if out := s.Outdated(); len(out) != 2 {
		t.Fatalf("outdated %v: a node that cannot resize is replaced", out)
	}
	if _, why := s.InPlace(s.Pods[0]); !strings.Contains(why, "no container resources") {
		t.Fatalf("why %q", why)
	}
	s = newSnapshot(fsm.Active, 1, 1, formed, sized(fsm.Size{Memory: "512Mi"}, small, small, small))
	if _, why := s.InPlace(s.Pods[0]); !strings.Contains(why, "QoS class") {
		t.Fatalf("a CPU removed: why %q", why)
	}
	// The settings planner: maxmemory waits, the rest goes.
	s = newSnapshot(fsm.Active, 1, 0, formed, sized(big, small, small, small))
	s.Settings = map[string]string{"maxmemory": "300mb", "hz": "20"}
	s.Pods[0].Node.Config = map[string]string{"maxmemory": "104857600", "hz": "10"}
	got := run(settings, fsm.Active, s).Actions
	if len(got) != 1 || len(got[0].(SetConfig).Set) != 1 || got[0].(SetConfig).Set[0].Key != "hz" {
		t.Fatalf("settings while growing: %v", got)
	}
}

// TestShrinkRefused: the condition's message says each reason once, after its pods.
func TestShrinkRefused(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 1, formed, sized(small, big, big, big), withMaxmemory("100mb"),
		withPod("p0-1", func(p *fsm.Pod) { p.Node.UsedMemoryRSS = 230 << 20 }), withPod("p1-1", func(p *fsm.Pod) { p.Node.UsedMemoryRSS = 230 << 20 }))
	want := "pods p0-0, p0-1, p1-0, p1-1: shrinking memory to 256Mi refused: its shard's nodes hold up to 230 MiB (used_memory_rss), more than 80% of the new limit; delete keys or lower maxmemory first, or keep the size"
	if got := ShrinkRefused(s); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	s = newSnapshot(fsm.Active, 2, 1, formed, sized(small, big, big, big), withMaxmemory("300mb"))
	if got := ShrinkRefused(s); !strings.HasPrefix(got, "pods p0-0, p0-1, p1-0, p1-1: shrinking memory to 256Mi refused: maxmemory 300mb does not fit") {
		t.Fatalf("got %q", got)
	}
	if got := ShrinkRefused(newSnapshot(fsm.Active, 2, 1, formed, sized(big, small, small, small))); got != "" {
		t.Fatalf("a grow: %q", got)
	}
}

// TestHeldSize: while a shrink is refused, a node created now gets the memory the refused nodes
// run, not the spec's.
func TestHeldSize(t *testing.T) {
	s := newSnapshot(fsm.Active, 2, 1, formed, sized(small, big, big, big), withMaxmemory("100mb"),
		withPod("p0-1", func(p *fsm.Pod) { p.Node.UsedMemoryRSS = 230 << 20 }))
	if got, ok := HeldSize(s); !ok || got != (fsm.Size{CPU: "500m", Memory: "512Mi"}) {
		t.Fatalf("held %v %v, want 512Mi", got, ok)
	}
	s = newSnapshot(fsm.Active, 2, 1, formed, sized(small, big, big, big), withMaxmemory("100mb"))
	if got, ok := HeldSize(s); ok {
		t.Fatalf("no shrink refused: held %v", got)
	}
}

// TestMaxmemoryHeldBelowTheSpec: a node with less memory than the spec asks for keeps its
// maxmemory, whether it grows in place or is replaced (a grow past its data volume's room).
func TestMaxmemoryHeldBelowTheSpec(t *testing.T) {
	s := newSnapshot(fsm.Active, 1, 0, formed, sized(big, small, small, small), withResize(func(r *fsm.Resize) { r.DataLimit = 576 << 20 }))
	if ok, _ := s.InPlace(s.Pods[0]); ok {
		t.Fatal("a grow past the data volume resized in place")
	}
	if !HoldsMaxmemory(s, s.Pods[0]) {
		t.Fatal("maxmemory raised on a node about to be replaced by a bigger one")
	}
	s = newSnapshot(fsm.Active, 1, 0, formed, sized(small, big, big, big))
	if HoldsMaxmemory(s, s.Pods[0]) {
		t.Fatal("maxmemory held on a node bigger than the spec")
	}
}
