package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// Cluster DNS. A real cluster runs CoreDNS as pods behind a Service IP that kube-proxy routes;
// here there is no kube-proxy, so CoreDNS (the real program, built by hack/build-coredns.sh with
// its kubernetes plugin) runs as one more local process of the control plane, listening on the
// slot's gateway address, port 53: pods reach it through their default route, the host's test
// process reaches it as a local address, and the local clusters side by side (Slots) each bind
// their own gateway. The kubelet points ClusterFirst pods' resolv.conf at it (kubelet/dns.go).
//
// It serves the cluster.local zone from the API server's Services and EndpointSlices, so a pod
// with hostname and subdomain behind a headless Service is {hostname}.{service}.{ns}.svc.cluster.local,
// ready or not when the Service publishes not-ready addresses. Other names go to the host's
// resolver, as a real cluster's Corefile forwards them. No cache plugin: a deleted pod's name
// should stop resolving as soon as its endpoint is gone (the kubernetes plugin answers from its
// own watch, with its default TTL of 5 s for clients that cache).

// CoreDNSVersion is the CoreDNS the local cluster runs as its cluster DNS.
const CoreDNSVersion = "v1.15.0"

// ClusterDomain is the local cluster's DNS domain.
const ClusterDomain = kubelet.DefaultClusterDomain

// dnsUser is the API user CoreDNS authenticates as; it may only read what the kubernetes plugin
// watches.
const dnsUser = "system:coredns"

// DefaultCoreDNS is where hack/build-coredns.sh (`make coredns`) puts CoreDNS: $COREDNS, else
// ~/.cache/valkey-operator/bin/coredns-<CoreDNSVersion>.
func DefaultCoreDNS() string {
	if p := os.Getenv("COREDNS"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "valkey-operator", "bin", "coredns-"+CoreDNSVersion)
}

// startDNS gives CoreDNS a read-only identity and starts it on the gateway. It returns without
// waiting; waitDNS waits for its first answer.
func (c *Cluster) startDNS(ctx context.Context, pctx context.Context, bin string, out io.Writer) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	// What the kubernetes plugin lists and watches without `pods verified` (the upstream
	// system:coredns ClusterRole, less pods, which only that mode watches).
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: dnsUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: dnsUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: dnsUser}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localcluster: coredns cluster role: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localcluster: coredns cluster role binding: %w", err)
	}
	dir := filepath.Join(c.Dir, "coredns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, dnsUser); err != nil {
		return err
	}
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(corefileFor(c.network.Gateway, kubeconfig, hostHasNameserver())), 0o644); err != nil {
		return err
	}
	c.dnsAddr = net.JoinHostPort(c.network.Gateway, "53")
	c.resolvConf = filepath.Join(dir, "resolv.conf")
	hostResolv := fmt.Sprintf("nameserver %s\nsearch svc.%s %s\noptions ndots:5\n", c.network.Gateway, ClusterDomain, ClusterDomain)
	if err := os.WriteFile(c.resolvConf, []byte(hostResolv), 0o644); err != nil {
		return err
	}
	// -conf names the state directory, so reapSlot finds a CoreDNS that a killed run left behind.
	if err := c.run(pctx, out, bin, "-conf", corefile); err != nil {
		return err
	}
	c.dnsPid = c.procs[len(c.procs)-1].Process.Pid
	return nil
}

// corefileFor is the Corefile of the local cluster's DNS on gateway. forward is left out when the
// host has no nameserver to forward to (CoreDNS would refuse to start).
func corefileFor(gateway, kubeconfig string, forward bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:53 {\n\tbind %s\n\terrors\n\tkubernetes %s {\n\t\tkubeconfig %s\n\t}\n}\n",
		ClusterDomain, gateway, ClusterDomain, kubeconfig)
	if forward {
		fmt.Fprintf(&b, ".:53 {\n\tbind %s\n\terrors\n\tforward . /etc/resolv.conf\n}\n", gateway)
	}
	return b.String()
}

// hostHasNameserver reports whether the host's resolv.conf names a nameserver.
func hostHasNameserver() bool {
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			return true
		}
	}
	return false
}

// waitDNS waits until CoreDNS answers for the API server's own Service, which means its
// informers have synced. If CoreDNS exits instead (its address taken, say), it says so at once,
// with the end of CoreDNS's log: Stop removes a temporary state directory, log included.
func (c *Cluster) waitDNS(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r := c.Resolver()
	name := "kubernetes.default.svc." + ClusterDomain + "."
	for {
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := r.LookupHost(qctx, name)
		qcancel()
		if err == nil {
			return nil
		}
		if exited(c.dnsPid) {
			return fmt.Errorf("localcluster: coredns exited: %s", logTail(filepath.Join(c.Dir, "logs", "coredns.log")))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: cluster DNS on %s does not answer for %s: %w; coredns log: %s",
				c.dnsAddr, name, errors.Join(err, ctx.Err()), logTail(filepath.Join(c.Dir, "logs", "coredns.log")))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exited reports whether process pid is gone or a zombie (it exited; Stop reaps it).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may hold anything.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}

// logTail is the end of a log file, for an error message.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return strings.TrimSpace(string(data))
}

// DNSAddr is the cluster DNS's address (the slot's gateway, port 53), which pods have as their
// nameserver and which the host reaches too.
func (c *Cluster) DNSAddr() string { return c.dnsAddr }

// Resolver resolves through the cluster DNS, so the host's test process can use the names that
// pods use: {pod}.{service}.{namespace}.svc.cluster.local, {service}.{namespace}.svc.cluster.local.
// Write names in full: the host's resolv.conf (its search list and ndots) still applies, not a
// pod's. Names outside cluster.local are forwarded to the host's resolver.
func (c *Cluster) Resolver() *net.Resolver { return NewResolver(c.dnsAddr) }

// Dialer is a net.Dialer that resolves through the cluster DNS, for clients that accept one:
// valkey-go's ClientOption{Dialer: *c.Dialer()} reaches "{pod}.{cluster}.{ns}.svc.cluster.local:6379"
// and follows redirections to announced hostnames (valkey-go fills in its own keep-alive).
func (c *Cluster) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, Resolver: c.Resolver()}
}

// CommandWithDNS is exec.Command(name, args...) run on the host but resolving names as a pod does,
// through the cluster DNS: for programs that take no resolver, such as valkey-cli or the
// operator's binary (the C library reads /etc/resolv.conf, and so does Go's resolver). The
// program runs in a mount namespace of its own (util-linux unshare) with a resolv.conf naming
// the cluster DNS bind-mounted over /etc/resolv.conf, the pods' way (kubelet/dns.go); the
// host's file is untouched. Its search list is svc.cluster.local and cluster.local, so
// "{service}.{namespace}" resolves as well as full names; other names go to the host's resolver.
func (c *Cluster) CommandWithDNS(name string, args ...string) *exec.Cmd {
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", `mount --bind "$0" /etc/resolv.conf && exec "$@"`, c.resolvConf, name}, args...)...)
}

// NewResolver is a resolver that sends every query to the DNS server at addr (host:port), over
// UDP or TCP as Go's resolver chooses; /etc/hosts is still read first.
func NewResolver(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true, // the cgo resolver would ignore Dial and ask the host's nameserver
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}
