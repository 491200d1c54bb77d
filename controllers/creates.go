package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
)

// A refused pod is a failure with its reason, retried with a back-off, never a pile of records.
// A node is three objects (ValkeyNode, {node}-config ConfigMap, pod); when the API server refuses
// one of them (a ResourceQuota, a LimitRange, Pod Security admission, a webhook, an object it
// finds invalid), the ValkeyNode is deleted in the same pass and the garbage collector takes its
// ConfigMap, so nothing outlives the pod that could not be created. Without this, each pass made
// a new node for the missing one, and the creations woke the next pass at once: 232 ValkeyNodes
// and 234 ConfigMaps in 20 s for a one-node cluster. The refusal holds back every creation of the
// cluster (fsm.Snapshot.CreateHeld) for createBackoffFirst, doubling per refusal up to
// createBackoffMax; a pod created, or a change of the spec (another generation), resets it. The
// back-off is the cluster's own: the other clusters' passes go on.
const (
	createBackoffFirst = time.Second
	createBackoffMax   = 5 * time.Minute
	// maxRefusalLength bounds the API server's reason as quoted in status and the log.
	maxRefusalLength = 1024
)

// createRefused is a node whose pod (or ConfigMap, or ValkeyNode) could not be created.
type createRefused struct {
	Pod    string
	Reason string
}

func (e *createRefused) Error() string {
	return fmt.Sprintf("pod %s could not be created: %s", e.Pod, e.Reason)
}

// createFailures is, per cluster ("namespace/name"), the last refused creation and its back-off.
type createFailures struct {
	mu sync.Mutex
	m  map[string]*createFailure
}

type createFailure struct {
	generation int64
	attempts   int
	retryAt    time.Time
	refused    createRefused
}

// state returns, for the cluster at generation gen, why its last creation was refused ("" when
// none) and whether the back-off still holds creations back, with how long it has to run. A
// record of another generation is dropped: the spec changed.
func (c *createFailures) state(key string, gen int64, now time.Time) (refused string, held bool, wait time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[key]
	if !ok {
		return "", false, 0
	}
	if f.generation != gen {
		delete(c.m, key)
		return "", false, 0
	}
	wait = f.retryAt.Sub(now)
	msg := f.refused.Error()
	if wait > 0 {
		msg += fmt.Sprintf("; retrying in %s", wait.Round(time.Second))
	}
	return msg, wait > 0, max(wait, 0)
}

// failed records a refusal and returns the back-off before the next try.
func (c *createFailures) failed(key string, gen int64, r createRefused, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*createFailure{}
	}
	f, ok := c.m[key]
	if !ok || f.generation != gen {
		f = &createFailure{generation: gen}
		c.m[key] = f
	}
	f.attempts++
	d := createBackoffMax
	if f.attempts <= 20 { // 2^19 s is past the cap already
		d = min(createBackoffFirst<<(f.attempts-1), createBackoffMax)
	}
	f.retryAt, f.refused = now.Add(d), r
	return d
}

// succeeded ends the cluster's back-off: a pod was created.
func (c *createFailures) succeeded(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

func (c *createFailures) forget(key string) { c.succeeded(key) }

// refusal turns an error of creating one of node's objects into a *createRefused, naming the pod
// and quoting the API server (bounded). A context that ran out is not a refusal: the pass ran out
// of its budget, and the error is returned as it is.
func refusal(pod string, err error) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || isGoingAway(err) {
		return err
	}
	msg := err.Error()
	if len(msg) > maxRefusalLength {
		msg = msg[:maxRefusalLength] + "…"
	}
	return &createRefused{Pod: pod, Reason: msg}
}

// undoNode deletes the ValkeyNode vn of a node whose creation was refused, in the same pass: its
// ConfigMap and pod, if any was created, go with it (garbage collection).
func (r *ValkeyClusterReconciler) undoNode(ctx context.Context, vn *v1.ValkeyNode) error {
	err := r.Delete(ctx, vn, client.Preconditions{UID: &vn.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("delete ValkeyNode %s of a refused pod: %w", vn.Name, err)
	}
	return nil
}

// checkCollision returns a refusal when obj, which the API server says already exists under the
// name of a node the operator just created, is not controlled by that node's ValkeyNode.
func (r *ValkeyClusterReconciler) checkCollision(ctx context.Context, vn *v1.ValkeyNode, obj client.Object, kind string) error {
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("get %s %s: %w", kind, obj.GetName(), err)
	}
	if !metav1.IsControlledBy(obj, vn) {
		return &createRefused{Pod: vn.Name, Reason: fmt.Sprintf("%s %s already exists and is not controlled by ValkeyNode %s", kind, obj.GetName(), vn.Name)}
	}
	return nil
}

// logRefused says a refusal at WARN, the contract's line for an error the operator retries.
func logRefused(log *zap.Logger, r *createRefused, wait time.Duration) {
	log.Warn(logging.MsgReconcileError, logging.Err(fmt.Errorf("%w; retrying in %s", r, wait.Round(time.Second))))
}
