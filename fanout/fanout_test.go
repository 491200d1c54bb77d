package fanout

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name, ip string, phase corev1.PodPhase, started time.Time) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase, PodIP: ip}}
	if !started.IsZero() {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
	}
	return p
}

func TestTargets(t *testing.T) {
	now := time.Now()
	old := now.Add(-time.Minute)
	deleting := pod("deleting", "10.0.0.4", corev1.PodRunning, old)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	exited := pod("exited", "10.0.0.5", corev1.PodRunning, time.Time{})
	exited.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	pods := []corev1.Pod{
		pod("a", "10.0.0.1", corev1.PodRunning, old),
		pod("pending", "", corev1.PodPending, time.Time{}),
		pod("noip", "", corev1.PodRunning, old),
		deleting,
		exited,
		pod("b", "fd00::2", corev1.PodRunning, old),
	}
	targets, starting := Targets(pods, 6379, now)
	var got []string
	for _, tg := range targets {
		got = append(got, tg.Pod.Name+"="+tg.Addr)
	}
	if want := []string{"a=10.0.0.1:6379", "b=[fd00::2]:6379"}; !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if starting {
		t.Fatal("no pod started within the grace, yet starting")
	}
	pods = append(pods, pod("new", "10.0.0.6", corev1.PodRunning, now.Add(-time.Second)))
	if targets, starting = Targets(pods, 6379, now); len(targets) != 2 || !starting {
		t.Fatalf("a pod started a second ago: %d targets, starting %v; want it left out and starting", len(targets), starting)
	}
}

// TestEachBounded: every target's result, in the targets' order, with never more than Limit
// steps running at once.
func TestEachBounded(t *testing.T) {
	var targets []Target
	for i := range 5 * Limit {
		p := pod(string(rune('a'+i%26))+string(rune('a'+i/26)), "10.0.0.1", corev1.PodRunning, time.Time{})
		targets = append(targets, Target{Pod: &p, Addr: p.Name})
	}
	var running, most atomic.Int32
	got := Each(t.Context(), targets, func(_ context.Context, tg Target) string {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		return tg.Addr
	})
	for i, tg := range targets {
		if got[i] != tg.Addr {
			t.Fatalf("result %d is %q, want %q: results out of order", i, got[i], tg.Addr)
		}
	}
	if m := most.Load(); m > Limit || m < 2 {
		t.Fatalf("%d steps ran at once, want between 2 and %d", m, Limit)
	}
}

// TestGuard: in flight from Begin until an observation that began after the step ended; an
// observation that began before the end does not count; an ended step whose cluster is never
// observed again is let go after MaxHold.
func TestGuard(t *testing.T) {
	g := &Guard{}
	t0 := time.Now()
	if _, busy := g.Busy("ns/a", t0); busy {
		t.Fatal("busy before anything began")
	}
	end := g.Begin("ns/a", "failover", t0)
	if what, busy := g.Busy("ns/a", t0.Add(time.Second)); !busy || what != "failover" {
		t.Fatalf("during the step: %q %v, want failover in flight", what, busy)
	}
	if _, busy := g.Busy("ns/b", t0); busy {
		t.Fatal("another cluster held")
	}
	g.Observed("ns/a", t0.Add(time.Second)) // began while the step ran
	if _, busy := g.Busy("ns/a", t0.Add(2*time.Second)); !busy {
		t.Fatal("an observation begun before the step ended let the guard go")
	}
	end(t0.Add(2 * time.Second))
	if _, busy := g.Busy("ns/a", t0.Add(3*time.Second)); !busy {
		t.Fatal("ended but not yet observed: let go")
	}
	g.Observed("ns/a", t0.Add(time.Second))
	if _, busy := g.Busy("ns/a", t0.Add(3*time.Second)); !busy {
		t.Fatal("an observation that began before the end let the guard go")
	}
	g.Observed("ns/a", t0.Add(3*time.Second))
	if _, busy := g.Busy("ns/a", t0.Add(3*time.Second)); busy {
		t.Fatal("observed after the end, still held")
	}

	end = g.Begin("ns/a", "takeover", t0)
	end(t0)
	if _, busy := g.Busy("ns/a", t0.Add(MaxHold)); !busy {
		t.Fatal("let go before MaxHold")
	}
	if _, busy := g.Busy("ns/a", t0.Add(MaxHold+time.Second)); busy {
		t.Fatal("held past MaxHold with no observation")
	}
	g.Begin("ns/a", "forget", t0)
	g.Forget("ns/a")
	if _, busy := g.Busy("ns/a", t0); busy {
		t.Fatal("held after Forget")
	}

	var none *Guard
	none.Begin("ns/a", "x", t0)(t0)
	none.Observed("ns/a", t0)
	if _, busy := none.Busy("ns/a", t0); busy {
		t.Fatal("a nil guard holds")
	}
}
