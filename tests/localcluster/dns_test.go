package localcluster_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// headlessService creates a headless Service that publishes not-ready addresses, as the
// operator's is (resources/service.go), selecting pods labelled app=name.
func headlessService(t *testing.T, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"app": name},
			Ports:                    []corev1.ServicePort{{Name: "valkey", Port: 6379}},
		},
	}
	if _, err := cs.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// memberOf puts the pod behind service with its own hostname, as the operator's pods are.
func memberOf(service string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": service}
		p.Spec.Hostname, p.Spec.Subdomain = p.Name, service
	}
}

// lookup asks the cluster DNS for name from the host, until it gives want (nil: until the name
// does not exist).
func lookup(t *testing.T, name string, want []string) {
	t.Helper()
	r := cluster.Resolver()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := r.LookupHost(qctx, name)
		qcancel()
		slices.Sort(got)
		var dnsErr *net.DNSError
		gone := errors.As(err, &dnsErr) && dnsErr.IsNotFound
		if (want == nil && gone) || (want != nil && err == nil && slices.Equal(got, want)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s through %s: got %v, %v; want %v", name, cluster.DNSAddr(), got, err, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestPodNamesResolve: CoreDNS serves {pod}.{service}.{ns}.svc.cluster.local of pods behind a
// headless Service from the API server, before the pods are Ready (publishNotReadyAddresses),
// to the host and to a process inside another pod (whose resolv.conf the kubelet wrote: the
// short name goes through the search list), and a deleted pod's name stops resolving.
func TestPodNamesResolve(t *testing.T) {
	headlessService(t, "dns")
	// Never Ready: its readiness probe fails.
	createPod(t, valkeyPod("dns-a", memberOf("dns"), func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1}
	}))
	a := waitPod(t, "dns-a", "an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	fqdn := "dns-a.dns.default.svc." + localcluster.ClusterDomain

	lookup(t, fqdn, []string{a.Status.PodIP})
	if a, err := cs.CoreV1().Pods("default").Get(context.Background(), "dns-a", metav1.GetOptions{}); err != nil || ready(a) {
		t.Fatalf("dns-a should not be Ready (its probe fails): %v", err)
	}
	// A host program that takes no resolver (getent here; valkey-cli, the operator) resolves as
	// a pod does when run with CommandWithDNS: the search list completes the name.
	if out, err := cluster.CommandWithDNS("getent", "hosts", "dns-a.dns.default").CombinedOutput(); err != nil ||
		len(strings.Fields(string(out))) < 2 || strings.Fields(string(out))[0] != a.Status.PodIP || strings.Fields(string(out))[1] != fqdn {
		t.Fatalf("getent hosts dns-a.dns.default on the host through the cluster DNS: %v\n%s", err, out)
	}
	// The Service's own name has every pod behind it.
	lookup(t, "dns.default.svc."+localcluster.ClusterDomain, []string{a.Status.PodIP})
	// valkey-go and the like dial through the cluster DNS with Dialer (once valkey-server listens).
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := cluster.Dialer().DialContext(context.Background(), "tcp", net.JoinHostPort(fqdn, "6379"))
		if err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", fqdn, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A process inside a pod resolves dns-a by its short name (search list, ndots:5) and in full.
	script := `cat /etc/resolv.conf
for n in dns-a.dns ` + fqdn + `; do
  until out=$(getent hosts "$n"); do sleep 0.2; done
  echo "resolved $out"
done
echo finished
exec sleep 3600`
	createPod(t, valkeyPod("dns-client", memberOf("dns"), func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Command, c.ReadinessProbe = []string{"/bin/sh", "-c", script}, nil
	}))
	waitPod(t, "dns-client", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	logPath, err := cluster.Kubelet.LogPath("default", "dns-client", "valkey")
	if err != nil {
		t.Fatal(err)
	}
	var log string
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log, "finished") {
		if time.Now().After(deadline) {
			t.Fatalf("the pod did not resolve dns-a within a minute; its log:\n%s", log)
		}
		time.Sleep(200 * time.Millisecond)
		data, _ := os.ReadFile(logPath)
		log = string(data)
	}
	wantLines := []string{
		"nameserver " + strings.TrimSuffix(cluster.DNSAddr(), ":53"),
		"search default.svc.cluster.local svc.cluster.local cluster.local",
		"options ndots:5",
	}
	for _, w := range wantLines {
		if !strings.Contains(log, w) {
			t.Errorf("the pod's log lacks %q:\n%s", w, log)
		}
	}
	// getent prints the address and the canonical name, for the short name too.
	resolved := 0
	for line := range strings.Lines(log) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "resolved" && f[1] == a.Status.PodIP && f[2] == fqdn {
			resolved++
		}
	}
	if resolved != 2 {
		t.Errorf("want both names resolved to %s %s:\n%s", a.Status.PodIP, fqdn, log)
	}

	// Deleted: its endpoint goes, and so does its name; the other pod's stays.
	if err := cs.CoreV1().Pods("default").Delete(context.Background(), "dns-a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	lookup(t, fqdn, nil)
	client := waitPod(t, "dns-client", "an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	lookup(t, "dns-client.dns.default.svc."+localcluster.ClusterDomain, []string{client.Status.PodIP})
}
