package controllers

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/valkey"
)

// Quiet looks: what a Ready cluster costs between its ticks.
//
// A Ready cluster with nothing to do is looked at every healthyInterval, because nothing in
// Kubernetes says that a node stopped answering (healthyInterval's comment). A full pass reads
// from the API server what must see its own writes (TestSteadyPassAPIReads) before it asks
// Valkey anything; at 100 clusters full passes every 5 s tripled the operator's steady CPU. Yet what those looks are for is on the Valkey side: a change on the
// Kubernetes side reaches the operator by a watch, which enqueues the cluster.
//
// So a look at a cluster whose last full pass found it Ready with nothing to do, and about which
// no watch event arrived since that pass began (logging.Tracker.LastChange), asks only its nodes,
// over the pooled connections, exactly what a pass asks them. If every node says what it said
// then (replication offsets aside), the pass would decide the same, and the look ends there: no
// API request, no status write, the node metrics refreshed from the answers. Anything else (a
// node silent, a flag, a slot, a setting changed by hand) runs the full pass at once, in the same
// reconcile. A full pass still runs on every tick, so the heartbeat, the Secrets and everything
// the API server holds are re-read every TickInterval whatever the watches say.
//
// TLS clusters are left out: their passes read the TLS Secret, which no watch follows, to tell
// the TLS controller of a rotation, so every look at them is a full pass.
//
// Healthy clusters are also spread in time: the interval is drawn from [healthyJitter ×
// healthyInterval, healthyInterval], never longer (a cut must still be seen within
// cluster-node-timeout), so clusters that healed together do not stay in step.

// healthyJitter is the shortest healthy interval, as a fraction of healthyInterval.
const healthyJitter = 0.8

// changeTracker says when a watch event last enqueued a cluster (logging.Tracker).
type changeTracker interface {
	LastChange(req ctrl.Request) time.Time
	Forget(req ctrl.Request)
}

// quietLook is what a quiet look compares with: the last full pass that found the cluster Ready
// with nothing to do.
type quietLook struct {
	// at is when that pass began: a watch event since then means something may have changed.
	at time.Time
	// addrs are the nodes that pass asked (the pods with a node view), pods their pod names and
	// nodes what each said, replication offset left out.
	addrs []string
	pods  []string
	nodes []fsm.Node
	creds valkey.Credentials
	// vc, state, obs and h are that pass's, for the node metrics.
	vc    *v1.ValkeyCluster
	state fsm.State
	obs   *observation
	h     health
}

// quietLooks holds one quietLook per cluster ("namespace/name").
type quietLooks struct {
	mu sync.Mutex
	m  map[string]*quietLook
}

func (q *quietLooks) get(key string) *quietLook {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m[key]
}

func (q *quietLooks) set(key string, l *quietLook) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string]*quietLook{}
	}
	q.m[key] = l
}

func (q *quietLooks) forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.m, key)
}

// fingerprint is what a node said, less what changes without anything happening.
func fingerprint(n *fsm.Node) fsm.Node {
	f := *n
	f.ReplOffset = 0
	return f
}

// rememberQuiet keeps what a full pass that began at start found, when it found the cluster
// Ready with nothing to do; otherwise it forgets the cluster's last quiet pass.
func (r *ValkeyClusterReconciler) rememberQuiet(start time.Time, vc *v1.ValkeyCluster, state fsm.State, obs *observation, h health, creds valkey.Credentials, quiet bool) {
	key := clusterKey(vc)
	// Not a TLS cluster: its passes read the TLS Secret, which no watch follows, and tell the TLS
	// controller of a rotation (TLSSecretSeen).
	if !quiet || r.changes == nil || vc.Spec.TLS != nil {
		r.looks.forget(key)
		return
	}
	kept := *obs // what recordPass reads: the snapshot, the stats, the TLS material
	kept.pods, kept.nodes, kept.addrs = nil, nil, nil
	l := &quietLook{at: start, creds: creds, vc: vc, state: state, obs: &kept, h: h}
	for _, p := range obs.snapshot.Pods {
		if p.Node != nil && p.IP != "" {
			l.addrs = append(l.addrs, nodeAddr(p.IP))
			l.pods = append(l.pods, p.Name)
			l.nodes = append(l.nodes, fingerprint(p.Node))
		}
	}
	r.looks.set(key, l)
}

// quietLook looks at a cluster as described above and reports whether that was enough; when
// it returns false the caller runs the full pass.
func (r *ValkeyClusterReconciler) quietLook(ctx context.Context, req ctrl.Request) (ctrl.Result, bool) {
	key := req.String()
	l := r.looks.get(key)
	if l == nil || r.changes == nil {
		return ctrl.Result{}, false
	}
	now := time.Now()
	// The tick's pass is a full one: the heartbeat, and everything re-read.
	if now.Sub(l.at) >= TickInterval-time.Second || !r.changes.LastChange(req).Before(l.at) {
		return ctrl.Result{}, false
	}
	views := r.conns.Observe(ctx, key, l.addrs, l.creds)
	fresh := map[string]*fsm.Node{}
	stats := map[string]valkey.NodeStats{}
	for i, v := range views {
		n := nodeView(v)
		if !v.Reachable || !reflect.DeepEqual(fingerprint(n), l.nodes[i]) {
			return ctrl.Result{}, false
		}
		fresh[l.pods[i]] = n
		stats[l.pods[i]] = v.Stats()
	}
	// The pass's bookkeeping of what this look saw: which nodes serve slots (served.go), and the
	// node metrics.
	obs := *l.obs
	obs.stats = stats
	obs.snapshot.Now = now
	obs.snapshot.Pods = append([]fsm.Pod(nil), l.obs.snapshot.Pods...)
	for i := range obs.snapshot.Pods {
		if n, ok := fresh[obs.snapshot.Pods[i].Name]; ok {
			obs.snapshot.Pods[i].Node = n
		}
	}
	r.served.observe(key, &obs.snapshot)
	r.recordPass(l.vc, l.state, &obs, l.h, now)
	// The next look, or the tick's full pass when that comes first: the heartbeat keeps its beat.
	next := jittered(healthyInterval)
	if untilTick := l.at.Add(TickInterval).Sub(now); untilTick < next {
		next = max(untilTick, 10*time.Millisecond)
	}
	return ctrl.Result{RequeueAfter: next}, true
}

// jittered is d shortened by up to (1 - healthyJitter) of itself, at random.
func jittered(d time.Duration) time.Duration {
	lo := time.Duration(float64(d) * healthyJitter)
	return lo + rand.N(d-lo+1) //nolint:gosec // spreading timers, not a secret
}
