package controllers

import (
	"fmt"
	"net"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// Valkey connections are kept open across passes in r.conns, keyed by cluster, node address
// and credentials (valkey.Pool). A connection is closed when its node leaves (the pod is gone,
// failed, its process exited or has another IP: retainConnections after every observation), when
// the credentials change (the pool compares them on every use) and when the cluster is deleted
// or its namespace goes away (Forget in the pass).

// clusterKey names a cluster in the pool: "namespace/name", as a reconcile request prints it.
func clusterKey(vc *v1.ValkeyCluster) string { return client.ObjectKeyFromObject(vc).String() }

// nodeAddr is the address the operator reaches a pod's node at.
func nodeAddr(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(resources.ClientPort)) }

// retainConnections closes the connections of nodes that this pass's observation did not
// query: exactly the pods observe asked (a node view is set on those alone), so a draining
// primary that is still asked keeps its connection until its process exits.
func (r *ValkeyClusterReconciler) retainConnections(vc *v1.ValkeyCluster, obs *observation) {
	var addrs []string
	for _, p := range obs.snapshot.Pods {
		if p.Node != nil && p.IP != "" {
			addrs = append(addrs, nodeAddr(p.IP))
		}
	}
	r.conns.Retain(clusterKey(vc), addrs)
}

// nodeClient is the pooled connection to the node of pod.
func (r *ValkeyClusterReconciler) nodeClient(vc *v1.ValkeyCluster, obs *observation, pod string, creds valkey.Credentials) (*valkey.Client, error) {
	p, ok := obs.pods[pod]
	if !ok || p.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP", pod)
	}
	return r.conns.Client(clusterKey(vc), nodeAddr(p.Status.PodIP), creds)
}
