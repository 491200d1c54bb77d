package localcluster_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

var (
	cluster *localcluster.Cluster
	cs      *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	c, err := localcluster.Start(ctx, localcluster.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cluster:", err)
		os.Exit(1)
	}
	cluster = c
	cs = kubernetes.NewForConfigOrDie(c.Config)
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop local cluster:", err)
	}
	os.Exit(code)
}

func valkeyPod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:           "valkey",
				Image:          "valkey/valkey:8.0.1",
				Command:        []string{"valkey-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", ""},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 1},
			}},
		},
	}
	for _, f := range mutate {
		f(p)
	}
	return p
}

// createPod creates pod in default and deletes it when the test ends.
func createPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: timed out waiting for %s (last: %+v, %v)", name, what, p.Status, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ping(ip string) (string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	return strings.TrimSpace(string(buf[:n])), err
}

func TestNodesAreZoned(t *testing.T) {
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		zones[n.Labels[corev1.LabelTopologyZone]] = true
	}
	if len(nodes.Items) < 3 || len(zones) < 3 {
		t.Fatalf("want >= 3 nodes in >= 3 zones, got %d nodes in zones %v", len(nodes.Items), zones)
	}
	// kubectl works with the written kubeconfig.
	out, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "get", "nodes", "-L", corev1.LabelTopologyZone).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "zone-b") {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
}

func TestHandAppliedPodRunsRealValkeyAndFailsWhenKilled(t *testing.T) {
	createPod(t, valkeyPod("hand"))
	p := waitPod(t, "hand", "Ready with an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" && ready(p) })
	if p.Spec.NodeName == "" {
		t.Fatal("pod was not scheduled by the scheduler")
	}
	if got, err := ping(p.Status.PodIP); err != nil || got != "+PONG" {
		t.Fatalf("PING %s: %q, %v", p.Status.PodIP, got, err)
	}
	// The kubelet serves container logs like a real one: kubectl logs goes through the API
	// server to the node.
	logs, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "logs", "hand").CombinedOutput()
	if err != nil || !strings.Contains(string(logs), "Ready to accept connections") {
		t.Fatalf("kubectl logs: %v\n%s", err, logs)
	}
	// ... and only the API server may: a client without its kubelet client certificate is
	// turned away at the handshake, so nothing else on the bridge can exec into a pod.
	node, err := cs.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeletAddr := net.JoinHostPort(cluster.Network.Gateway, fmt.Sprint(node.Status.DaemonEndpoints.KubeletEndpoint.Port))
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the point is the client side
	}}
	if resp, err := httpc.Get("https://" + kubeletAddr + "/containerLogs/default/hand/valkey"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("the kubelet API answered %s to a client without a certificate", resp.Status)
	}
	if err := cluster.Kubelet.KillPod("default", "hand"); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, "hand", "phase Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if _, err := ping(p.Status.PodIP); err == nil {
		t.Fatal("killed pod still answers")
	}
}

func TestUnschedulablePodStaysPendingWithSchedulerReason(t *testing.T) {
	pod := valkeyPod("nowhere", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "does-not-exist"} })
	createPod(t, pod)
	p := waitPod(t, "nowhere", "PodScheduled=False", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	var msg string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			if c.Reason != corev1.PodReasonUnschedulable {
				t.Fatalf("reason %q", c.Reason)
			}
			msg = c.Message
		}
	}
	if !strings.Contains(msg, "didn't match Pod's node affinity/selector") || p.Status.Phase != corev1.PodPending {
		t.Fatalf("phase %s, scheduler message %q", p.Status.Phase, msg)
	}
}

// TestImageTagChoosesValkey: the image's tag chooses the server that really runs, as pulling the
// image would: valkey/valkey:8.0.1 runs the host's 8.0.1, valkey/valkey:9.1.2 Debian sid's 9.1.2
// (hack/install-valkey9.sh). Each pod runs as the operator's do (uid 999, no_new_privs), and its
// exec liveness probe, like the operator's, runs valkey-cli inside the container: it must find
// the same version's valkey-cli. The probe leaves a mark on the pod's emptyDir that the readiness
// probe waits for, so Ready means the liveness probe has passed.
func TestImageTagChoosesValkey(t *testing.T) {
	for _, version := range []string{"8.0.1", localcluster.Valkey9Version} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			name := "tag-" + strings.ReplaceAll(version, ".", "-")
			createPod(t, valkeyPod(name, func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{
					RunAsUser: ptr.To[int64](999), RunAsGroup: ptr.To[int64](999), FSGroup: ptr.To[int64](999),
				}
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				c := &p.Spec.Containers[0]
				c.Image = "valkey/valkey:" + version
				c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
				c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
				live := fmt.Sprintf(`valkey-cli --version | grep -qx 'valkey-cli %s' && [ "$(valkey-cli PING)" = PONG ] && touch /data/alive`, version)
				c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", live}}},
					PeriodSeconds: 1, FailureThreshold: 5}
				c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/data/alive"}}},
					PeriodSeconds: 1}
			}))
			p := waitPod(t, name, "Ready, or Failed", func(p *corev1.Pod) bool { return ready(p) || p.Status.Phase == corev1.PodFailed })
			if p.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod failed (a liveness probe that found another valkey-cli kills it): %+v", p.Status.ContainerStatuses)
			}
			c, err := valkey.NewClient(net.JoinHostPort(p.Status.PodIP, "6379"), valkey.Credentials{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, err := c.Info(context.Background(), "server")
			if err != nil {
				t.Fatal(err)
			}
			if info["valkey_version"] != version {
				t.Fatalf("image valkey/valkey:%s runs valkey_version %q (INFO server: %v)", version, info["valkey_version"], info)
			}
		})
	}
}
