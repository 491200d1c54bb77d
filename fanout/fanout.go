// Package fanout is how the ACL and TLS controllers reach every node of a cluster: which pods to
// tell (Targets), telling them at once with a bound (Each), and keeping off a cluster while the
// cluster controller carries out a disruptive action on it (Guard).
//
// Both controllers push something every node must hold (an ACL file, a certificate) and do it
// apart from the cluster controller's passes. One fan-out keeps their rules the same, and the
// guard keeps their pushes out of a failover, a takeover, a forget or a retirement: an ACL LOAD
// or a CONFIG SET on the node being promoted is one more thing that can fail in the middle of
// the step that can least afford it, and a push that lands halfway through a takeover is
// reported against the wrong primary.
//
// It does no I/O of its own: the step given to Each does.
package fanout

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gomomento/valkey-operator/logging"
)

// Limit is how many nodes of one cluster are told at once. A push is one round trip or two
// per node; 16 at once tells a 100-node cluster in about 7 round trips, and bounds the
// connections a pass opens whatever the cluster's size.
const Limit = 16

// StartGrace: a node whose container started this recently read the current files itself and
// may not listen yet. It is not told: the caller looks again soon.
const StartGrace = 5 * time.Second

// Target is one node to tell: its pod and its client address.
type Target struct {
	Pod  *corev1.Pod
	Addr string
}

// Targets returns the pods whose node is to be told, in the order given, and whether some were
// left out because they started within StartGrace (the caller looks again soon). A pod is told
// when its process runs, has an address and is not being deleted (on its way out, it may stop
// answering at any moment, and telling it would only turn that into a WARN).
func Targets(pods []corev1.Pod, port int, now time.Time) (targets []Target, starting bool) {
	for i := range pods {
		p := &pods[i]
		if !running(p) {
			continue
		}
		if StartedWithin(p, StartGrace, now) {
			starting = true
			continue
		}
		targets = append(targets, Target{Pod: p, Addr: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))})
	}
	return targets, starting
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return false
		}
	}
	return true
}

// StartedWithin reports whether p's container started less than d before now.
func StartedWithin(p *corev1.Pod, d time.Duration, now time.Time) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && now.Sub(r.StartedAt.Time) < d {
			return true
		}
	}
	return false
}

// Each runs step for every target, at most Limit at once, and returns their results in the
// targets' order. A node that fails does not hold back the others: each step reports its own.
// A step that panics is that node's failure, not the process's: its result is failed's, given
// the recovered panic (logging.Recovered), and the others go on. Nothing else recovers these
// goroutines: controller-runtime recovers only the reconcile's own.
func Each[T any](ctx context.Context, targets []Target, step func(context.Context, Target) T, failed func(Target, *logging.PanicError) T) []T {
	out := make([]T, len(targets))
	sem := make(chan struct{}, Limit)
	var wg sync.WaitGroup
	for i, t := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					out[i] = failed(t, logging.Recovered(r))
				}
				<-sem
			}()
			out[i] = step(ctx, t)
		})
	}
	wg.Wait()
	return out
}

// Guard keeps, per cluster, the cluster controller's disruptive steps and the ACL and TLS
// controllers' pushes apart. The controllers ask Push before they touch a cluster's nodes, and
// come back later while a step is in flight; the executor's Begin waits for a push under way.
//
// A step is in flight from Begin until the cluster controller has observed the cluster after it
// ended (Observed; the cluster controller does not report an observation that still shows a
// failover it issued and has not seen land): a failover's or takeover's effect lands after the
// command returns. Two bounds keep a push from waiting for good:
//   - a push held for MaxWait goes ahead anyway: a reshard or a roll is a disruptive step every
//     pass or two for minutes, and a revoked user or a rotated CA must not wait for its end;
//   - a step whose cluster is never observed again (the operator lost the lease; Forget when the
//     cluster is gone) is let go MaxHold after it ended.
type Guard struct {
	mu       sync.Mutex
	inFlight map[string]*step
	pushes   map[string]*push
}

const (
	// MaxHold bounds how long an ended step keeps a cluster's pushes waiting for the cluster
	// controller's next observation: it looks again within a second of a disruptive step.
	MaxHold = 30 * time.Second
	// MaxWait is the longest a push waits for steps in flight, however many follow each other.
	MaxWait = 10 * time.Second
	// BeginWait is the longest a step waits for a push under way before it starts anyway: a push
	// is a round trip or two per node, 16 nodes at a time, and a node that does not answer
	// costs a dial timeout (1 s). A quorum-loss takeover can afford that, not more.
	BeginWait = 2 * time.Second
)

type step struct {
	what  string
	ended time.Time // zero while the step runs
}

type push struct {
	firstHeld time.Time     // when the first held attempt came; zero when none was held
	running   int           // the pushes under way (the ACL and the TLS controller's)
	idle      chan struct{} // closed when the last of them ends
}

// Begin records that the cluster controller starts the disruptive step what on cluster, once a
// push under way there has ended (at most BeginWait, or until ctx ends). The returned func
// records the step's end; call it once the step returned, failed or not.
func (g *Guard) Begin(ctx context.Context, cluster, what string) (end func(at time.Time)) {
	return g.begin(ctx, cluster, what, BeginWait)
}

// BeginNow is Begin without waiting for a push under way: for a step that ends a refusal of
// writes (a lost primary's replica promoted), which a push to a node that does not answer (a
// dial timeout per node) must not hold back. The pushes that start after it wait for it as
// for any step.
func (g *Guard) BeginNow(ctx context.Context, cluster, what string) (end func(at time.Time)) {
	return g.begin(ctx, cluster, what, 0)
}

func (g *Guard) begin(ctx context.Context, cluster, what string, wait time.Duration) (end func(at time.Time)) {
	if g == nil {
		return func(time.Time) {}
	}
	g.mu.Lock()
	if p := g.pushes[cluster]; p != nil && p.running > 0 && wait > 0 {
		done := p.idle
		g.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-done:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		g.mu.Lock()
	}
	s := &step{what: what}
	if g.inFlight == nil {
		g.inFlight = map[string]*step{}
	}
	g.inFlight[cluster] = s
	g.mu.Unlock()
	return func(at time.Time) {
		g.mu.Lock()
		s.ended = at
		g.mu.Unlock()
	}
}

// Observed records that the cluster controller observed cluster, its observation having begun
// at began: a step that had ended before then is no longer in flight.
func (g *Guard) Observed(cluster string, began time.Time) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.inFlight[cluster]; ok && !s.ended.IsZero() && !began.Before(s.ended) {
		delete(g.inFlight, cluster)
	}
}

// Busy returns the step in flight on cluster, and whether there is one.
func (g *Guard) Busy(cluster string, now time.Time) (what string, busy bool) {
	if g == nil {
		return "", false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy(cluster, now)
}

func (g *Guard) busy(cluster string, now time.Time) (string, bool) {
	s, ok := g.inFlight[cluster]
	if !ok {
		return "", false
	}
	if !s.ended.IsZero() && now.Sub(s.ended) > MaxHold {
		delete(g.inFlight, cluster)
		return "", false
	}
	return s.what, true
}

// Push asks to push to cluster's nodes at now. While a step is in flight it returns the step and
// false, for the first MaxWait of the push's waiting; otherwise true and a release to call when
// the push has ended, a Begin meanwhile waiting for it.
func (g *Guard) Push(cluster string, now time.Time) (held string, release func(), ok bool) {
	if g == nil {
		return "", func() {}, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pushes == nil {
		g.pushes = map[string]*push{}
	}
	p := g.pushes[cluster]
	if p == nil {
		p = &push{}
		g.pushes[cluster] = p
	}
	if what, busy := g.busy(cluster, now); busy {
		if p.firstHeld.IsZero() {
			p.firstHeld = now
		}
		if now.Sub(p.firstHeld) < MaxWait {
			return what, nil, false
		}
	}
	if p.running == 0 {
		p.idle = make(chan struct{})
	}
	p.running++
	p.firstHeld = time.Time{}
	return "", func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if p.running--; p.running == 0 {
			close(p.idle)
			if g.pushes[cluster] == p {
				delete(g.pushes, cluster)
			}
		}
	}, true
}

// Forget drops what the guard holds of a cluster that is gone.
func (g *Guard) Forget(cluster string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.inFlight, cluster)
	delete(g.pushes, cluster)
	g.mu.Unlock()
}
