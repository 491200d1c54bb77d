package controllers

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gomomento/valkey-operator/fanout"
)

// nodeRetries is what the ACL and TLS controllers keep between passes about nodes that failed or
// lag behind their mounted Secret: when each node's failure was last said at WARN, and how many
// catch-up passes a cluster has had for the same desired content. Keys: a cluster's
// "namespace/name", and "namespace/name/pod" for a node.
type nodeRetries struct {
	mu sync.Mutex
	// warned is, per cluster and pod, the last failure said at WARN and when (warnDue).
	warned map[string]warning
	// behind counts, per cluster, the passes since a node last lagged behind the same desired
	// content: after aclCatchUpFastTries of them the delay grows (next).
	behind map[string]catchUp
	// silent is, per cluster and pod, the back-off of a node that did not answer (notSilent).
	silent map[string]silence
}

// silence is the back-off of a node that did not answer: not tried again before until; gap is
// the last wait.
type silence struct {
	until time.Time
	gap   time.Duration
}

// A node that accepts connections and never answers (a hung server, a node paused by a client
// of its team's) used to be tried on every catch-up pass, every second, each try holding one of
// the controller's workers, shared by every team, for the command's whole timeout. Such a node
// is now left alone for silentFirst, then twice as long after each silent try, up to
// silentLongest: a node that answers again is told within the tick, as a node whose file
// changed is. The cluster controller's health looks are not affected: its observation never
// waits on a silent node for more than its peers needed (valkey.Pool.Observe).
const (
	silentFirst   = healthyInterval
	silentLongest = TickInterval
)

type warning struct {
	err string
	at  time.Time
}

type catchUp struct {
	file     string
	attempts int
}

// warnDue reports whether a failure of node key (cluster/pod) should be said at WARN: the first,
// one with another error, or the same one a tick after it was last said.
func (r *nodeRetries) warnDue(key, err string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned == nil {
		r.warned = map[string]warning{}
	}
	w, ok := r.warned[key]
	if ok && w.err == err && now.Sub(w.at) < TickInterval {
		return false
	}
	r.warned[key] = warning{err: err, at: now}
	return true
}

// next is the delay before the cluster's next pass: the tick, or while a node lags behind
// desired (a digest of the content it should have), aclCatchUpFast for the first
// aclCatchUpFastTries passes, then aclCatchUpSlow, counted afresh when desired changes.
func (r *nodeRetries) next(key, desired string, behind bool) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.behind == nil {
		r.behind = map[string]catchUp{}
	}
	if !behind {
		delete(r.behind, key)
		return TickInterval
	}
	c := r.behind[key]
	if c.file != desired {
		c = catchUp{file: desired}
	}
	d := aclCatchUpFast
	if c.attempts >= aclCatchUpFastTries {
		d = aclCatchUpSlow
	}
	c.attempts++
	r.behind[key] = c
	return d
}

// noAnswer reports whether err is a node that did not answer in time (a timeout of the dial or
// of a command), rather than one that refused or failed at once.
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// notSilent returns the targets whose node is not in its silent back-off, and whether some were
// left out (the caller looks again soon: they are behind).
func (r *nodeRetries) notSilent(cluster string, targets []fanout.Target, now time.Time) (out []fanout.Target, skipped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range targets {
		if s, ok := r.silent[cluster+"/"+t.Pod.Name]; ok && now.Before(s.until) {
			skipped = true
			continue
		}
		out = append(out, t)
	}
	return out, skipped
}

// heard records how the node key (cluster/pod) did: silent (it did not answer) grows its
// back-off, anything else ends it.
func (r *nodeRetries) heard(key string, silent bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !silent {
		delete(r.silent, key)
		return
	}
	if r.silent == nil {
		r.silent = map[string]silence{}
	}
	gap := silentFirst
	if s, ok := r.silent[key]; ok {
		gap = min(2*s.gap, silentLongest)
	}
	r.silent[key] = silence{until: now.Add(gap), gap: gap}
}

// forgetWarnings drops what warnDue and heard remember of cluster's pods that no longer exist.
func (r *nodeRetries) forgetWarnings(cluster string, pods []corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := map[string]bool{}
	for _, p := range pods {
		live[cluster+"/"+p.Name] = true
	}
	for k := range r.warned {
		if strings.HasPrefix(k, cluster+"/") && !live[k] {
			delete(r.warned, k)
		}
	}
	for k := range r.silent {
		if strings.HasPrefix(k, cluster+"/") && !live[k] {
			delete(r.silent, k)
		}
	}
}

// forgetCluster drops everything kept about a cluster.
func (r *nodeRetries) forgetCluster(cluster string) {
	r.forgetWarnings(cluster, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.behind, cluster)
}
