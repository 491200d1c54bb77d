package fanout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gomomento/valkey-operator/logging"
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
	}, func(Target, *logging.PanicError) string { return "" })
	for i, tg := range targets {
		if got[i] != tg.Addr {
			t.Fatalf("result %d is %q, want %q: results out of order", i, got[i], tg.Addr)
		}
	}
	if m := most.Load(); m > Limit || m < 2 {
		t.Fatalf("%d steps ran at once, want between 2 and %d", m, Limit)
	}
}

// TestEachRecovers: a step that panics (here as valkey-go did on `$-2`) is its node's failure,
// with the panic and its stack; the other nodes' steps run and the process goes on. Before, the
// panic of a fan-out goroutine ended the operator.
func TestEachRecovers(t *testing.T) {
	var targets []Target
	for _, name := range []string{"a", "b", "c"} {
		p := pod(name, "10.0.0.1", corev1.PodRunning, time.Time{})
		targets = append(targets, Target{Pod: &p, Addr: name})
	}
	got := Each(t.Context(), targets, func(_ context.Context, tg Target) error {
		if tg.Addr == "b" {
			_ = make([]byte, -len(tg.Addr)-1) // makeslice: len out of range
		}
		return nil
	}, func(tg Target, p *logging.PanicError) error { return p })
	var pe *logging.PanicError
	if got[0] != nil || got[2] != nil || !errors.As(got[1], &pe) {
		t.Fatalf("results %v", got)
	}
	if !strings.Contains(pe.Error(), "makeslice") || !strings.Contains(pe.Stack, "TestEachRecovers") {
		t.Errorf("the panic %q, stack:\n%s", pe, pe.Stack)
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
	end := g.Begin(t.Context(), "ns/a", "failover")
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

	end = g.Begin(t.Context(), "ns/a", "takeover")
	end(t0)
	if _, busy := g.Busy("ns/a", t0.Add(MaxHold)); !busy {
		t.Fatal("let go before MaxHold")
	}
	if _, busy := g.Busy("ns/a", t0.Add(MaxHold+time.Second)); busy {
		t.Fatal("held past MaxHold with no observation")
	}
	g.Begin(t.Context(), "ns/a", "forget")
	g.Forget("ns/a")
	if _, busy := g.Busy("ns/a", t0); busy {
		t.Fatal("held after Forget")
	}

	var none *Guard
	none.Begin(t.Context(), "ns/a", "x")(t0)
	none.Observed("ns/a", t0)
	if _, busy := none.Busy("ns/a", t0); busy {
		t.Fatal("a nil guard holds")
	}
}

// TestPushWaitsAtMostMaxWait: while steps follow each other (a reshard: a slot move every pass,
// each observed and the next begun within a few milliseconds), a push is held at first, and goes
// ahead once it has waited MaxWait; it is held again only by a step begun after it.
func TestPushWaitsAtMostMaxWait(t *testing.T) {
	g := &Guard{}
	t0 := time.Unix(1_000_000, 0)
	const key = "ns/vc"
	end := g.Begin(t.Context(), key, "move slots")
	pushed := []time.Duration{}
	for at := time.Duration(0); at < time.Minute; at += time.Second {
		now := t0.Add(at)
		// The steps never leave a gap at a whole second: each ends, is observed and the next
		// begins between two of the controller's looks.
		end(now.Add(-10 * time.Millisecond))
		g.Observed(key, now.Add(-5*time.Millisecond))
		end = g.Begin(t.Context(), key, "move slots")
		if held, release, ok := g.Push(key, now); ok {
			pushed = append(pushed, at)
			release()
		} else if held != "move slots" {
			t.Fatalf("held by %q", held)
		}
	}
	if len(pushed) < 5 || pushed[0] != MaxWait {
		t.Fatalf("pushes went ahead at %v within a minute of back-to-back steps, want the first at %s and one every %s or so", pushed, MaxWait, MaxWait)
	}
	end(t0.Add(time.Minute))
	g.Observed(key, t0.Add(time.Minute))
	if _, release, ok := g.Push(key, t0.Add(time.Minute)); !ok {
		t.Fatal("held with no step in flight")
	} else {
		release()
	}
}

// TestBeginWaitsForAPush: a step that begins while a push is under way waits for it to end,
// and for at most BeginWait when it does not.
func TestBeginWaitsForAPush(t *testing.T) {
	g := &Guard{}
	const key = "ns/vc"
	_, release, ok := g.Push(key, time.Now())
	if !ok {
		t.Fatal("held with no step in flight")
	}
	_, second, _ := g.Push(key, time.Now()) // the other controller's push, under way beside it
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		released <- time.Now()
		release()
		time.Sleep(100 * time.Millisecond)
		second()
	}()
	start := time.Now()
	end := g.Begin(t.Context(), key, "failover")
	began := time.Now()
	end(began)
	if first := <-released; began.Sub(start) < 190*time.Millisecond || began.Before(first) {
		t.Fatalf("the step began %s after it asked, before both pushes ended", began.Sub(start))
	}

	g.Observed(key, time.Now())
	_, stuck, ok := g.Push(key, time.Now())
	if !ok {
		t.Fatal("held after the step was observed")
	}
	defer stuck()
	start = time.Now()
	g.Begin(t.Context(), key, "takeover")(time.Now())
	if d := time.Since(start); d < BeginWait || d > BeginWait+time.Second {
		t.Fatalf("a step waited %s for a push that does not end, want BeginWait (%s)", d, BeginWait)
	}
}

// TestBeginNowWaitsForNoPush: a step that promotes a lost primary's replica begins at once,
// whatever push is under way (a push to a cut node waits out its dial timeout), and the pushes
// after it are held as after any step.
func TestBeginNowWaitsForNoPush(t *testing.T) {
	g := &Guard{}
	const key = "ns/vc"
	_, stuck, ok := g.Push(key, time.Now())
	if !ok {
		t.Fatal("held with no step in flight")
	}
	defer stuck()
	start := time.Now()
	end := g.BeginNow(t.Context(), key, "takeover")
	if d := time.Since(start); d > BeginWait/4 {
		t.Fatalf("the step waited %s for a push under way", d)
	}
	if _, _, ok := g.Push(key, time.Now()); ok {
		t.Fatal("a push went ahead while the step runs")
	}
	end(time.Now())
}
