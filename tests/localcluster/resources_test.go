package localcluster_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestResourcesEnforcedAndResizedInPlace: every local cluster's kubelet enforces a pod's
// resources (the kubelet package's tests show each behaviour; this one shows the local cluster
// wires it in). A Valkey pod of the harness's size (50m, 128Mi, Guaranteed, as the operator
// renders a ValkeyConfig's resources) runs in a cgroup of its own with those limits, its exec
// probe (valkey-cli, as the operator's liveness probe) passes within the 50m quota, and a resize
// through the pods/resize subresource reaches the running cgroup and the pod's status with the
// same process serving. The figures (time to Ready, resize request to cgroup, to status) are
// logged, not asserted.
func TestResourcesEnforcedAndResizedInPlace(t *testing.T) {
	if os.Getenv("LOCALCLUSTER_RESOURCES") == "0" {
		t.Skip("LOCALCLUSTER_RESOURCES=0: resources not enforced")
	}
	list := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	small, big := list("50m", "128Mi"), list("100m", "256Mi")
	created := time.Now()
	createPod(t, valkeyPod("sized", func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources = corev1.ResourceRequirements{Requests: small, Limits: small}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/sh", "-c", `[ "$(valkey-cli PING)" = PONG ]`}}}, PeriodSeconds: 1}
	}))
	p := waitPod(t, "sized", "Ready", func(p *corev1.Pod) bool { return ready(p) || p.Status.Phase == corev1.PodFailed })
	if p.Status.Phase == corev1.PodFailed {
		t.Fatalf("pod failed: %+v", p.Status.ContainerStatuses)
	}
	t.Logf("created to Ready (exec probe passed in a 50m quota): %v", time.Since(created).Round(time.Millisecond))
	if p.Status.QOSClass != corev1.PodQOSGuaranteed || !sameResources(p, small) {
		t.Fatalf("QoS %s, status resources %+v: want Guaranteed and %v reported", p.Status.QOSClass, p.Status.ContainerStatuses[0].Resources, small)
	}
	pid := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "local://")
	cgroupFile := func(controller, file string) string {
		t.Helper()
		dir, err := cluster.Kubelet.CgroupDir("default", "sized", "valkey", controller)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	for _, ctl := range []string{"memory", "cpu"} {
		if procs := strings.Fields(cgroupFile(ctl, "cgroup.procs")); !slices.Contains(procs, pid) {
			t.Fatalf("pid %s is not in its container's %s cgroup (%v)", pid, ctl, procs)
		}
	}
	if got := cgroupFile("memory", "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
		t.Fatalf("memory.limit_in_bytes = %s, want 128Mi", got)
	}
	if got := cgroupFile("cpu", "cpu.cfs_quota_us"); got != "5000" {
		t.Fatalf("cpu.cfs_quota_us = %s, want 5000 (50m of a 100 ms period)", got)
	}

	pingsAtSmall := pingsInASecond(t, p.Status.PodIP)

	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: big, Limits: big}
	asked := time.Now()
	out, err := cs.CoreV1().Pods("default").UpdateResize(context.Background(), "sized", p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize: %v", err)
	}
	var inCgroup time.Duration
	for deadline := time.Now().Add(time.Minute); inCgroup == 0; time.Sleep(5 * time.Millisecond) {
		if cgroupFile("memory", "memory.limit_in_bytes") == strconv.Itoa(256<<20) && cgroupFile("cpu", "cpu.cfs_quota_us") == "10000" {
			inCgroup = time.Since(asked)
		} else if time.Now().After(deadline) {
			t.Fatalf("the cgroup still has %s bytes, quota %s", cgroupFile("memory", "memory.limit_in_bytes"), cgroupFile("cpu", "cpu.cfs_quota_us"))
		}
	}
	p = waitPod(t, "sized", "the resize reported done", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
				return false
			}
		}
		return p.Status.ObservedGeneration >= out.Generation && sameResources(p, big)
	})
	t.Logf("resize 50m/128Mi -> 100m/256Mi: request to cgroup %v, to status %v", inCgroup.Round(time.Millisecond), time.Since(asked).Round(time.Millisecond))
	if got := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "local://"); got != pid || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("the container was restarted: pid %s (was %s), state %+v", got, pid, p.Status.ContainerStatuses[0].State)
	}
	if got, err := ping(p.Status.PodIP); err != nil || got != "+PONG" {
		t.Fatalf("PING after the resize: %q, %v", got, err)
	}
	t.Logf("PINGs answered in 1 s, one connection: %d at 50m, %d at 100m", pingsAtSmall, pingsInASecond(t, p.Status.PodIP))
	events, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=sized"})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	t.Logf("events: %v", reasons)
}

// pingsInASecond counts the PINGs a server answers in one second on one connection, one at a
// time: what its CPU quota lets through.
func pingsInASecond(t *testing.T, ip string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	r := bufio.NewReader(conn)
	n := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); n++ {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING: %q %v", line, err)
		}
	}
	return n
}

// sameResources tells whether the pod's first container reports limits and requests of want in
// force and allocated.
func sameResources(p *corev1.Pod, want corev1.ResourceList) bool {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Resources == nil {
		return false
	}
	cs := p.Status.ContainerStatuses[0]
	same := func(a corev1.ResourceList) bool {
		if len(a) != len(want) {
			return false
		}
		for k, v := range want {
			if w, ok := a[k]; !ok || !v.Equal(w) {
				return false
			}
		}
		return true
	}
	return same(cs.Resources.Limits) && same(cs.Resources.Requests) && same(cs.AllocatedResources)
}
