package harness

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// ClusterPods returns vc's running pods that are not being deleted: the nodes a client can
// reach now.
func ClusterPods(ctx context.Context, c client.Client, vc *v1.ValkeyCluster) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", vc.Namespace, vc.Name, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// PodAddr is the pod's Valkey address, its IP and port 6379.
func PodAddr(p corev1.Pod) string { return net.JoinHostPort(p.Status.PodIP, "6379") }

// OperatorCreds reads the operator's generated credentials for vc (Secret
// {cluster}-operator-auth): the one user every node accepts whatever the cluster's ACL says.
func OperatorCreds(ctx context.Context, c client.Client, vc *v1.ValkeyCluster) (valkey.Credentials, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: vc.Name + "-operator-auth"}, &s); err != nil {
		return valkey.Credentials{}, fmt.Errorf("operator credentials of %s/%s: %w", vc.Namespace, vc.Name, err)
	}
	pw := s.Data["operator-password"]
	if len(pw) == 0 {
		pw = s.Data["password"] // a Secret an operator before the original's key names made
	}
	return valkey.Credentials{Username: "_momento_operator", Password: string(pw)}, nil
}

// ServiceHost is the DNS name of vc's headless Service, which a TLS certificate covers.
func ServiceHost(vc *v1.ValkeyCluster) string {
	return vc.Name + "." + vc.Namespace + ".svc." + localcluster.ClusterDomain
}

// PodHost is the DNS name a TLS node announces and is verified under.
func PodHost(vc *v1.ValkeyCluster, pod string) string { return pod + "." + ServiceHost(vc) }

// TLSCreds turns creds into TLS credentials for vc's pods: trusting roots alone and verifying
// each node under its pod's DNS name (the operator dials pod IPs, so the name comes from the
// address).
func TLSCreds(creds valkey.Credentials, vc *v1.ValkeyCluster, pods []corev1.Pod, roots *x509.CertPool) valkey.Credentials {
	creds.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	names := map[string]string{}
	for _, p := range pods {
		names[PodAddr(p)] = p.Name
	}
	creds.ServerName = func(a string) string { return PodHost(vc, names[a]) }
	return creds
}

// PasswordHash is the SHA-256 digest of pw in hex, as an ACL binding's passwordHashes holds it.
func PasswordHash(pw string) string {
	sum := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(sum[:])
}

// ValkeyHealthy returns "" when Valkey itself says the cluster at addrs is whole, else what is
// wrong: there are shards × (replicas+1) nodes and all answer, each says cluster_state:ok with
// 16384 slots assigned and knows exactly those nodes; there are `shards` primaries owning every
// slot once, each with `replicas` replicas whose link is up. Not the operator's view: the nodes'.
func ValkeyHealthy(ctx context.Context, addrs []string, creds valkey.Credentials, shards, replicas int) string {
	if want := shards * (replicas + 1); len(addrs) != want {
		return fmt.Sprintf("%d running pods, want %d", len(addrs), want)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	views := valkey.Observe(ctx, addrs, creds)
	owners := make([]int, valkey.SlotCount)
	linked := map[string]int{} // primary id -> replicas with link up
	nPrimaries := 0
	for _, v := range views {
		if !v.Reachable {
			return fmt.Sprintf("%s unreachable: %v", v.Addr, v.Err)
		}
		if !v.ClusterStateOK() || v.ClusterInfo["cluster_slots_assigned"] != "16384" || v.ClusterInfo["cluster_known_nodes"] != strconv.Itoa(len(addrs)) {
			return fmt.Sprintf("%s: cluster_state %s, slots assigned %s, known nodes %s", v.Addr,
				v.ClusterInfo["cluster_state"], v.ClusterInfo["cluster_slots_assigned"], v.ClusterInfo["cluster_known_nodes"])
		}
		me, _ := v.Myself()
		switch me.Role {
		case valkey.RolePrimary:
			nPrimaries++
			for _, r := range me.Slots {
				for s := r.Start; s <= r.End; s++ {
					owners[s]++
				}
			}
		case valkey.RoleReplica:
			if !v.ReplicaLinkUp() {
				return fmt.Sprintf("replica %s: master_link_status %s", v.Addr, v.Replication["master_link_status"])
			}
			linked[me.PrimaryID]++
		}
	}
	if nPrimaries != shards {
		return fmt.Sprintf("%d primaries, want %d", nPrimaries, shards)
	}
	for s, n := range owners {
		if n != 1 {
			return fmt.Sprintf("slot %d has %d owners", s, n)
		}
	}
	if replicas > 0 && len(linked) != shards {
		return fmt.Sprintf("replicas follow %d primaries, want %d", len(linked), shards)
	}
	for id, n := range linked {
		if n != replicas {
			return fmt.Sprintf("primary %s has %d synced replicas, want %d", id, n, replicas)
		}
	}
	return ""
}
