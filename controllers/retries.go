package controllers

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
}

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

// forgetWarnings drops what warnDue remembers of cluster's pods that no longer exist.
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
}

// forgetCluster drops everything kept about a cluster.
func (r *nodeRetries) forgetCluster(cluster string) {
	r.forgetWarnings(cluster, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.behind, cluster)
}
