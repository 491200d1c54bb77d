package kubelet

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// provider is one node's side of virtual-kubelet's PodLifecycleHandler and
// PodNotifier: it hands pods to the Kubelet's shared process runtime.
//
// Its methods never block on a pod's start or stop. virtual-kubelet marks a
// restartPolicy Never pod Failed ("ProviderFailed") as soon as CreatePod
// returns an error, while a real kubelet keeps a pod Pending until a missing
// ConfigMap or Secret appears, so start-up problems are reported through the
// container's waiting state instead and retried in the background.
type provider struct {
	k    *Kubelet
	node string
	// pods is the node's view of the API; it tells a pod we run apart from a
	// newer pod of the same name.
	pods corev1listers.PodLister
}

var _ interface {
	CreatePod(context.Context, *corev1.Pod) error
	NotifyPods(context.Context, func(*corev1.Pod))
} = (*provider)(nil)

func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	deadline := time.Now().Add(replacedPodTimeout)
	for {
		p.k.mu.Lock()
		old, ok := p.k.pods[key]
		if !ok {
			r := newPodRuntime(p.k, p.node, pod)
			p.k.pods[key] = r
			p.k.mu.Unlock()
			r.start()
			return nil
		}
		p.k.mu.Unlock()
		if old.uid() == pod.UID {
			old.update(pod)
			return nil
		}
		// A pod of the same name was force-deleted and created again: the
		// old one's processes go first, as the kubelet would do. (An error
		// here would make virtual-kubelet fail the new pod.)
		old.replace()
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s: the previous pod of this name is still stopping", key)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replacedPodTimeout bounds the wait for a same-name predecessor to stop.
const replacedPodTimeout = 30 * time.Second

func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	r, err := p.k.pod(pod.Namespace, pod.Name)
	if err != nil {
		return errdefs.AsNotFound(err)
	}
	r.update(pod)
	return nil
}

// DeletePod starts a graceful stop: SIGTERM now, SIGKILL after the grace
// period. The terminal status is reported once every process has exited;
// virtual-kubelet then deletes the pod object with grace 0.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	r, err := p.k.pod(pod.Namespace, pod.Name)
	if err != nil {
		return errdefs.AsNotFound(err)
	}
	if r.uid() != pod.UID {
		return errdefs.NotFound("pod with this uid is gone")
	}
	r.terminate(gracePeriod(pod))
	return nil
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	r, err := p.k.pod(namespace, name)
	if err != nil || r.node != p.node {
		return nil, errdefs.NotFoundf("pod %s/%s not found", namespace, name)
	}
	// virtual-kubelet looks pods up by name only: when the name now belongs
	// to a newer pod, ours is stale; stop it, and say "not found" so that the
	// newer one is created.
	if cur, err := p.pods.Pods(namespace).Get(name); err == nil && cur.UID != r.uid() {
		r.replace()
		return nil, errdefs.NotFoundf("pod %s/%s with uid %s not found", namespace, name, cur.UID)
	}
	return r.snapshot(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, r := range p.k.podsOn(p.node) {
		out = append(out, r.snapshot())
	}
	return out, nil
}

func (p *provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.k.mu.Lock()
	defer p.k.mu.Unlock()
	if ns, ok := p.k.nodes[p.node]; ok && !ns.stopping {
		ns.notify = cb
	}
}

func gracePeriod(pod *corev1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}
