package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// NetworkPolicies. A real cluster's network plugin enforces them; here the enforcer is
// sigs.k8s.io/kube-network-policies (a Kubernetes SIG project), built by hack/build-netpol.sh with
// a main of ours (hack/netpol), run as one process per local Node, like a DaemonSet's pod. Each
// process keeps an nftables table (inet family) that sends the first packet of every connection
// to or from a pod of its Node that a policy selects to an nfqueue, and gives the verdict in user
// space from the policies, pods and namespaces it watches. Later packets of an accepted
// connection pass by conntrack.
//
// Where it hooks: pods are network namespaces whose veths sit on the slot's bridge, so pod to
// pod traffic is bridged, not routed, and the inet hooks see it only through br_netfilter. The
// slot's bridge gets nf_call_iptables on (a per-bridge option, which the kernel ORs with the
// machine-wide bridge-nf-call-iptables sysctl, left off: kubelet/network.go), so only the slots
// that run an enforcer have their bridged traffic judged. Traffic from the host (the operator in
// the tests, the test's own clients, all as root) is accepted by the project's own rule for
// root's sockets on the node (its kubelet probes), as most network plugins let a node reach its
// own pods.
//
// Slots side by side share the host's netfilter: each slot's tables are named after its bridge
// (valkey-<bridge>-<node>), its queues are 1000 + 32·slot + the node's index, and its pods' IPs
// are in its own range, so a rule of one slot never matches another's packets.

// NetpolVersion is the kube-network-policies release hack/netpol pins.
const NetpolVersion = "v0.8.0"

// DefaultNetpol is where hack/build-netpol.sh (`make netpol`) puts the enforcer: $NETPOL, else
// ~/.cache/valkey-operator/bin/netpol-<NetpolVersion>.
func DefaultNetpol() string {
	if p := os.Getenv("NETPOL"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "valkey-operator", "bin", "netpol-"+NetpolVersion)
}

// netpolUser is the API user the enforcers authenticate as: they read what they judge by.
const netpolUser = "system:kube-network-policies"

// netpolTablePrefix starts the name of every nftables table of the slot of network n.
func netpolTablePrefix(n kubelet.NetworkConfig) string { return "valkey-" + n.Bridge + "-" }

// cleanNetpol deletes the slot's nftables tables that a killed run may have left: their rules
// send packets to queues nobody reads any more, and the kernel drops them. A machine without
// the enforcer has none to delete.
func (c *Cluster) cleanNetpol(bin string) {
	if _, err := os.Stat(bin); err != nil {
		return
	}
	_ = exec.Command(bin, "-cleanup", "-table", netpolTablePrefix(c.network)).Run()
}

// startNetpol starts one enforcer per Node of nodes, on slot's queues, and turns on the
// bridge's nf_call_iptables. It returns without waiting for their first sync.
func (c *Cluster) startNetpol(ctx, pctx context.Context, bin string, slot int, nodes []kubelet.NodeSpec, out io.Writer) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("localcluster: the NetworkPolicy enforcer is not at %s: run `make netpol`", bin)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: netpolUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: netpolUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: netpolUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: netpolUser}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localcluster: enforcer cluster role: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localcluster: enforcer cluster role binding: %w", err)
	}
	dir := filepath.Join(c.Dir, "netpol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, netpolUser); err != nil {
		return err
	}
	if err := kubelet.BridgeNetfilter(c.network, true); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	for i, n := range nodes {
		// -kubeconfig names the state directory, so reapSlot finds an enforcer a killed run
		// left behind.
		if err := c.run(pctx, out, bin, "-kubeconfig", kubeconfig, "-node", n.Name,
			"-table", netpolTablePrefix(c.network)+n.Name, "-queue", fmt.Sprint(1000+32*slot+i)); err != nil {
			return err
		}
	}
	c.NetworkPolicies = true
	return nil
}
