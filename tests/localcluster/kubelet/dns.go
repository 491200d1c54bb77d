package kubelet

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A pod's /etc/resolv.conf, as a kubelet writes it (pkg/kubelet/network/dns in Kubernetes; we
// cannot import the kubelet, so its rules are restated here, reduced to what the local kubelet
// supports: no hostNetwork).
//
//   - ClusterFirst (the default) and ClusterFirstWithHostNet: Config.ClusterDNS as the only
//     nameserver, search "<ns>.svc.<domain> svc.<domain> <domain>" followed by the host's own
//     search domains, options ndots:5. Without Config.ClusterDNS a kubelet falls back to
//     Default, and so do we.
//   - Default: the host's resolv.conf.
//   - None: only what spec.dnsConfig says.
//   - spec.dnsConfig is then merged in: its nameservers and searches are appended (duplicates
//     dropped), its options replace options of the same name.
//   - At most 3 nameservers (glibc reads no more) and 32 search domains, as a kubelet caps them.
//
// The file is written under the pod's directory and bind-mounted read-only over /etc/resolv.conf
// in each container's mount namespace, so the host's own file is never touched. A pod whose
// result is exactly the host's file (Default without dnsConfig) gets no mount at all.

const (
	// DefaultClusterDomain is the DNS domain of the cluster when Config.ClusterDomain is empty.
	DefaultClusterDomain = "cluster.local"
	maxDNSNameservers    = 3
	maxDNSSearches       = 32
	hostResolvConf       = "/etc/resolv.conf"
)

// resolvConf is the content of a resolv.conf file.
type resolvConf struct {
	nameservers, searches, options []string
}

func (r resolvConf) String() string {
	var b strings.Builder
	for _, ns := range r.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(r.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(r.searches, " "))
	}
	if len(r.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(r.options, " "))
	}
	return b.String()
}

// parseResolvConf reads the nameserver, search (or domain) and options lines of a resolv.conf.
func parseResolvConf(data []byte) resolvConf {
	var r resolvConf
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			r.nameservers = append(r.nameservers, f[1])
		case "search", "domain":
			// The last search or domain line wins, as in glibc.
			r.searches = append([]string(nil), f[1:]...)
		case "options":
			r.options = append(r.options, f[1:]...)
		}
	}
	return r
}

// podResolvConf is the resolv.conf the pod's containers get, and false when they keep the
// host's file unchanged. host is the host's resolv.conf.
func (k *Kubelet) podResolvConf(pod *corev1.Pod, host resolvConf) (resolvConf, bool) {
	domain := k.cfg.ClusterDomain
	if domain == "" {
		domain = DefaultClusterDomain
	}
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && k.cfg.ClusterDNS == "" {
		policy = corev1.DNSDefault
	}
	var r resolvConf
	switch policy {
	case corev1.DNSNone:
	case corev1.DNSDefault:
		if pod.Spec.DNSConfig == nil {
			return resolvConf{}, false
		}
		r = host
	default: // ClusterFirst, ClusterFirstWithHostNet
		r.nameservers = []string{k.cfg.ClusterDNS}
		r.searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.searches...)
		r.options = []string{"ndots:5"}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		r.nameservers = appendNew(r.nameservers, dc.Nameservers...)
		r.searches = appendNew(r.searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			r.options = slices.DeleteFunc(r.options, func(s string) bool {
				name, _, _ := strings.Cut(s, ":")
				return name == o.Name
			})
			r.options = append(r.options, opt)
		}
	}
	if len(r.nameservers) > maxDNSNameservers {
		r.nameservers = r.nameservers[:maxDNSNameservers]
	}
	if len(r.searches) > maxDNSSearches {
		r.searches = r.searches[:maxDNSSearches]
	}
	return r, true
}

// appendNew appends the values that list does not hold yet.
func appendNew(list []string, values ...string) []string {
	list = slices.Clone(list)
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// writeResolvConf writes the pod's resolv.conf into its directory and returns its path, or ""
// when the pod keeps the host's.
func (p *podRuntime) writeResolvConf(pod *corev1.Pod) (string, error) {
	data, err := os.ReadFile(hostResolvConf)
	if err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("read the host's resolv.conf: %w", err)
	}
	r, ok := p.k.podResolvConf(pod, parseResolvConf(data))
	if !ok {
		return "", nil
	}
	path := filepath.Join(p.k.podDir(pod), "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(r.String()), 0o644); err != nil {
		return "", fmt.Errorf("write the pod's resolv.conf: %w", err)
	}
	return path, nil
}
