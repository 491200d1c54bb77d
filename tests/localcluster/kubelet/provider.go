package kubelet

import (
	"context"
	"fmt"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
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
}

var _ interface {
	CreatePod(context.Context, *corev1.Pod) error
	NotifyPods(context.Context, func(*corev1.Pod))
} = (*provider)(nil)

func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	p.k.mu.Lock()
	if old, ok := p.k.pods[key]; ok {
		p.k.mu.Unlock()
		if old.uid() == pod.UID {
			old.update(pod)
			return nil
		}
		return fmt.Errorf("pod %s: an older pod with the same name is still terminating", key)
	}
	r := newPodRuntime(p.k, p.node, pod)
	p.k.pods[key] = r
	p.k.mu.Unlock()
	r.start()
	return nil
}

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
