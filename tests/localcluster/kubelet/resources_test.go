package kubelet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node the resize tests bind to: small allocatable (so that a resize can be Deferred) and
// the static memory manager policy (so that a Guaranteed pod's memory resize is Infeasible).
const resizeNode = "kt-d"

// withResources sets the pod's first container's requests and limits ("cpu=100m,memory=64Mi").
func withResources(requests, limits string) podOpt {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources = corev1.ResourceRequirements{Requests: resourceList(requests), Limits: resourceList(limits)}
	}
}

func resourceList(s string) corev1.ResourceList {
	if s == "" {
		return nil
	}
	out := corev1.ResourceList{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

// resize changes the pod's first container's resources through the pods/resize subresource, as
// `kubectl patch --subresource resize` does.
func resize(t *testing.T, ns, name, requests, limits string) *corev1.Pod {
	t.Helper()
	p := getPod(t, ns, name)
	c := &p.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{Requests: resourceList(requests), Limits: resourceList(limits)}
	out, err := client.CoreV1().Pods(ns).UpdateResize(context.Background(), name, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize %s/%s to requests %s limits %s: %v", ns, name, requests, limits, err)
	}
	return out
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// sameList compares two resource lists by value.
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

// resized tells whether the pod reports the resize of generation gen done: the container's
// actual resources are the spec's, nothing pending or in progress, the status is of gen.
func resized(p *corev1.Pod, gen int64) bool {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Resources == nil {
		return false
	}
	spec, got := p.Spec.Containers[0].Resources, p.Status.ContainerStatuses[0].Resources
	return p.Status.ObservedGeneration >= gen && sameList(spec.Requests, got.Requests) && sameList(spec.Limits, got.Limits) &&
		sameList(spec.Requests, p.Status.ContainerStatuses[0].AllocatedResources) &&
		podCondition(p, corev1.PodResizePending) == nil && podCondition(p, corev1.PodResizeInProgress) == nil
}

// cgroupFile reads a file of the pod's container's cgroup.
func cgroupFile(t *testing.T, ns, pod, container, controller, file string) string {
	t.Helper()
	dir, err := kl.CgroupDir(ns, pod, container, controller)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// cgroupValue reads one key of a "key value" cgroup file (memory.oom_control, cpu.stat).
func cgroupValue(t *testing.T, ns, pod, container, controller, file, key string) int64 {
	t.Helper()
	for line := range strings.Lines(cgroupFile(t, ns, pod, container, controller, file)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s has no %s", file, key)
	return 0
}

// procStart is the start time of a process in clock ticks since boot (/proc/<pid>/stat field
// 22): a process started again under the same pid would differ.
func procStart(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	s := string(data)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[19]
}

// valkeyClient is a minimal RESP client over one connection (AUTHenticated), enough for SET,
// GET and DBSIZE with large values.
type valkeyClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialValkey(t *testing.T, ip string) *valkeyClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &valkeyClient{conn: conn, r: bufio.NewReaderSize(conn, 1<<16)}
	t.Cleanup(func() { _ = conn.Close() })
	if out, err := c.do("AUTH", "s3cret"); err != nil || out != "OK" {
		t.Fatalf("AUTH: %q %v", out, err)
	}
	return c
}

// do sends one command and returns a simple, integer or bulk reply; an error reply is an error.
func (c *valkeyClient) do(args ...string) (string, error) {
	_ = c.conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return "", fmt.Errorf("empty reply")
	case line[0] == '-':
		return "", fmt.Errorf("%s", line[1:])
	case line[0] == '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return line[1:], nil
	}
}

// mib is a value of 1 MiB that says which key it belongs to.
func mib(i int) string {
	head := fmt.Sprintf("value-%d-", i)
	return head + strings.Repeat("x", 1<<20-len(head))
}

// TestOOMKilled: a valkey-server filled past its 64Mi memory limit is killed by the kernel, as on
// a real node, and the pod says so: container terminated, reason OOMKilled, exit code 137, pod
// Failed. The container's cgroup counted the kill.
func TestOOMKilled(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	createPod(t, ns, newValkeyPod("valkey-oom", "kt-a", withResources("cpu=500m,memory=64Mi", "cpu=500m,memory=64Mi")))
	p := waitPod(t, ns, "valkey-oom", 30*time.Second, "pod running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	})
	pid(t, p)
	if got := cgroupFile(t, ns, "valkey-oom", "valkey-server", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory.limit_in_bytes = %s, want %d", got, 64<<20)
	}
	eventually(t, 10*time.Second, "valkey answers", func() (bool, string) {
		out, err := valkeyDo(p.Status.PodIP, time.Second, "PING")
		return err == nil && out != "", fmt.Sprint(out, err)
	})
	c := dialValkey(t, p.Status.PodIP)
	written := 0
	for i := range 200 {
		if _, err := c.do("SET", fmt.Sprintf("k%d", i), mib(i)); err != nil {
			t.Logf("SET k%d: %v (the server is gone)", i, err)
			break
		}
		written++
	}
	if written == 200 {
		t.Fatalf("200 MiB written into a pod of 64Mi and valkey-server still answers: the limit is not enforced")
	}
	p = waitPod(t, ns, "valkey-oom", 30*time.Second, "pod Failed with its container OOMKilled", func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodFailed || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && term.Reason == "OOMKilled" && term.ExitCode == 137
	})
	if n := cgroupValue(t, ns, "valkey-oom", "valkey-server", "memory", "memory.oom_control", "oom_kill"); n < 1 {
		t.Errorf("memory.oom_control oom_kill = %d, want at least 1", n)
	}
	t.Logf("killed after %d MiB written; container %+v", written, p.Status.ContainerStatuses[0].State.Terminated)
}

// TestResizeInPlace: a valkey-server of 64Mi holding 40 MiB is resized to 256Mi through the
// pods/resize subresource: same process (pid and start time), the new limit in its cgroup and
// in its status, then 100 MiB more (past the old limit) with no OOM kill, and every key read
// back. A shrink back to 64Mi, below what it now uses, is refused as a v1.37 kubelet refuses it:
// the resize stays in progress with reason Error, the limit and the process stay.
func TestResizeInPlace(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createValkeyObjects(t, ns)
	small, big := "cpu=200m,memory=64Mi", "cpu=200m,memory=256Mi"
	createPod(t, ns, newValkeyPod("valkey-grow", "kt-b", withResources(small, small)))
	p := waitPod(t, ns, "valkey-grow", 30*time.Second, "pod running with its resources reported", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && resized(p, p.Generation)
	})
	// A pod never resized reports its resources too (the API server refuses a resize without them).
	cs := p.Status.ContainerStatuses[0]
	if !sameList(cs.Resources.Limits, resourceList(small)) || !sameList(cs.AllocatedResources, resourceList(small)) ||
		!sameList(p.Status.AllocatedResources, resourceList(small)) || p.Status.ObservedGeneration != p.Generation {
		t.Fatalf("status of a new pod: resources %+v allocated %v pod allocated %v observedGeneration %d (generation %d)",
			cs.Resources, cs.AllocatedResources, p.Status.AllocatedResources, p.Status.ObservedGeneration, p.Generation)
	}
	if p.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Fatalf("QoS %s, want Guaranteed", p.Status.QOSClass)
	}
	proc := pid(t, p)
	started := procStart(t, proc)
	for _, ctl := range []string{"memory", "cpu"} {
		if procs := strings.Fields(cgroupFile(t, ns, "valkey-grow", "valkey-server", ctl, "cgroup.procs")); !slices.Contains(procs, strconv.Itoa(proc)) {
			t.Fatalf("pid %d is not in its container's %s cgroup (%v)", proc, ctl, procs)
		}
	}
	eventually(t, 10*time.Second, "valkey answers", func() (bool, string) {
		out, err := valkeyDo(p.Status.PodIP, time.Second, "PING")
		return err == nil && out != "", fmt.Sprint(out, err)
	})
	c := dialValkey(t, p.Status.PodIP)
	for i := range 40 {
		if _, err := c.do("SET", fmt.Sprintf("k%d", i), mib(i)); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}

	out := resize(t, ns, "valkey-grow", big, big)
	p = waitPod(t, ns, "valkey-grow", 20*time.Second, "the resize to 256Mi done", func(p *corev1.Pod) bool { return resized(p, out.Generation) })
	if got := p.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceMemory]; got.Value() != 256<<20 {
		t.Fatalf("status resources limits.memory = %s", got.String())
	}
	if got := cgroupFile(t, ns, "valkey-grow", "valkey-server", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(256<<20) {
		t.Fatalf("memory.limit_in_bytes = %s after the resize, want %d", got, 256<<20)
	}
	if pid(t, p) != proc || procStart(t, proc) != started || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("the container was restarted: pid %d (was %d), state %+v", pid(t, p), proc, p.Status.ContainerStatuses[0].State)
	}
	for i := 40; i < 140; i++ {
		if _, err := c.do("SET", fmt.Sprintf("k%d", i), mib(i)); err != nil {
			t.Fatalf("SET k%d after the resize: %v", i, err)
		}
	}
	for i := range 140 {
		v, err := c.do("GET", fmt.Sprintf("k%d", i))
		if err != nil || v != mib(i) {
			t.Fatalf("GET k%d: %d bytes, %v", i, len(v), err)
		}
	}
	if n := cgroupValue(t, ns, "valkey-grow", "valkey-server", "memory", "memory.oom_control", "oom_kill"); n != 0 {
		t.Fatalf("%d OOM kills", n)
	}

	// Shrinking below the usage (140 MiB in 64Mi) is refused, not OOM-killed.
	out = resize(t, ns, "valkey-grow", small, small)
	p = waitPod(t, ns, "valkey-grow", 20*time.Second, "the shrink held in progress with an error", func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodResizeInProgress)
		return p.Status.ObservedGeneration >= out.Generation && c != nil && c.Reason == corev1.PodReasonError
	})
	// The pod's cgroup limit (the sum of its containers') falls too, so both are refused, in the
	// aggregate form of the kubelet's message.
	msg := podCondition(p, corev1.PodResizeInProgress).Message
	for _, want := range []string{
		"cannot decrease memory limits: [",
		fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (", 64<<20),
		fmt.Sprintf(`attempting to set container "valkey-server" memory limit (%d) below current usage (`, 64<<20),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("PodResizeInProgress message %q, want it to contain %q", msg, want)
		}
	}
	cs = p.Status.ContainerStatuses[0]
	if !sameList(cs.AllocatedResources, resourceList(small)) || !sameList(cs.Resources.Limits, resourceList(big)) {
		t.Errorf("allocated %v (want the new 64Mi), actual %v (want the 256Mi still in force)", cs.AllocatedResources, cs.Resources.Limits)
	}
	if got := cgroupFile(t, ns, "valkey-grow", "valkey-server", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(256<<20) {
		t.Errorf("memory.limit_in_bytes = %s, want the 256Mi kept", got)
	}
	if v, err := c.do("DBSIZE"); err != nil || v != "140" {
		t.Fatalf("DBSIZE %q %v: the server did not keep its data", v, err)
	}
	// Given up: back to 256Mi, nothing in progress any more.
	out = resize(t, ns, "valkey-grow", big, big)
	waitPod(t, ns, "valkey-grow", 20*time.Second, "the shrink withdrawn", func(p *corev1.Pod) bool { return resized(p, out.Generation) })
	if pid(t, getPod(t, ns, "valkey-grow")) != proc || procStart(t, proc) != started {
		t.Fatal("the container was restarted")
	}
}

// TestResizeDeferredAndInfeasible, on a node of 2 cpu and 1Gi allocatable with the static memory
// manager policy: a resize larger than the node is refused by the API server; one that does not
// fit beside the other pods is Deferred with the scheduler's message, and goes through once the
// other pod is gone; a Guaranteed pod's memory resize is Infeasible there, as the static memory
// manager makes it.
func TestResizeDeferredAndInfeasible(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	sleeper := func(name, requests, limits string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: resizeNode, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(0)),
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
					Resources: corev1.ResourceRequirements{Requests: resourceList(requests), Limits: resourceList(limits)}}}},
		}
	}
	createPod(t, ns, sleeper("a", "memory=300Mi", "memory=400Mi"))
	createPod(t, ns, sleeper("b", "memory=300Mi", "memory=400Mi"))
	createPod(t, ns, sleeper("g", "cpu=100m,memory=100Mi", "cpu=100m,memory=100Mi"))
	for _, name := range []string{"a", "b", "g"} {
		waitPod(t, ns, name, 30*time.Second, "running", func(p *corev1.Pod) bool { return resized(p, p.Generation) && p.Status.Phase == corev1.PodRunning })
	}
	pending := func(name, reason string, gen int64) *corev1.PodCondition {
		p := waitPod(t, ns, name, 20*time.Second, "PodResizePending "+reason, func(p *corev1.Pod) bool {
			c := podCondition(p, corev1.PodResizePending)
			return c != nil && c.Reason == reason && c.ObservedGeneration == gen && c.Status == corev1.ConditionTrue
		})
		return podCondition(p, corev1.PodResizePending)
	}

	// Larger than the node's allocatable: the API server's PodResizeValidator admission refuses
	// it (Forbidden, cause NodeCapacity) from the Node's status; the kubelet never sees it.
	p := getPod(t, ns, "a")
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: resourceList("memory=2Gi"), Limits: resourceList("memory=2Gi")}
	_, err := client.CoreV1().Pods(ns).UpdateResize(context.Background(), "a", p, metav1.UpdateOptions{})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsForbidden(err) || status.Status().Details == nil ||
		!slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Type == "NodeCapacity" }) ||
		!strings.Contains(err.Error(), fmt.Sprintf("node didn't have enough allocatable resources: memory, requested: %d, allocatable: %d", 2<<30, 1<<30)) {
		t.Fatalf("a resize above the node's allocatable: %v, want Forbidden with cause NodeCapacity", err)
	}
	// Fits the node, not beside b: Deferred (the kubelet's predicate; its status manager makes
	// every pending reason but Infeasible Deferred), and the old allocation stays in force.
	out := resize(t, ns, "a", "memory=800Mi", "memory=900Mi")
	c := pending("a", corev1.PodReasonDeferred, out.Generation)
	if want := fmt.Sprintf("Node didn't have enough resource: memory, requested: %d, used: %d, capacity: %d", 800<<20, 400<<20, 1<<30); c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	p = getPod(t, ns, "a")
	if cs := p.Status.ContainerStatuses[0]; !sameList(cs.AllocatedResources, resourceList("memory=300Mi")) || !sameList(cs.Resources.Limits, resourceList("memory=400Mi")) {
		t.Errorf("a deferred resize changed the allocation: allocated %v, limits %v", cs.AllocatedResources, cs.Resources.Limits)
	}
	if got := cgroupFile(t, ns, "a", "main", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(400<<20) {
		t.Errorf("memory.limit_in_bytes = %s, want 400Mi kept", got)
	}
	// b leaves: the deferred resize goes through.
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "b", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "a", 20*time.Second, "the deferred resize done once b is gone", func(p *corev1.Pod) bool { return resized(p, out.Generation) })
	if got := cgroupFile(t, ns, "a", "main", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(900<<20) {
		t.Errorf("memory.limit_in_bytes = %s, want 900Mi", got)
	}

	// The static memory manager: a Guaranteed pod's memory cannot be resized.
	out = resize(t, ns, "g", "cpu=100m,memory=150Mi", "cpu=100m,memory=150Mi")
	c = pending("g", corev1.PodReasonInfeasible, out.Generation)
	if want := `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	if got := cgroupFile(t, ns, "g", "main", "memory", "memory.limit_in_bytes"); got != strconv.Itoa(100<<20) {
		t.Errorf("memory.limit_in_bytes = %s, want 100Mi kept", got)
	}
	// Its CPU can (only the memory manager is static).
	out = resize(t, ns, "g", "cpu=200m,memory=100Mi", "cpu=200m,memory=100Mi")
	waitPod(t, ns, "g", 20*time.Second, "the CPU resize done", func(p *corev1.Pod) bool { return resized(p, out.Generation) })
}

// TestCPULimits: limits.cpu is a CFS quota and requests.cpu the shares, read back from the
// container's cgroup, and a busy loop is throttled by it; a resize changes both in place.
func TestCPULimits(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: corev1.PodSpec{NodeName: "kt-c", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(0)),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "while :; do :; done"},
				Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=100m"), Limits: resourceList("cpu=200m")}}}},
	})
	p := waitPod(t, ns, "busy", 30*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && resized(p, p.Generation) })
	pid(t, p)
	for file, want := range map[string]string{"cpu.cfs_quota_us": "20000", "cpu.cfs_period_us": "100000", "cpu.shares": "102"} {
		if got := cgroupFile(t, ns, "busy", "main", "cpu", file); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	eventually(t, 10*time.Second, "the busy loop throttled", func() (bool, string) {
		n := cgroupValue(t, ns, "busy", "main", "cpu", "cpu.stat", "nr_throttled")
		return n > 0, fmt.Sprintf("nr_throttled %d", n)
	})
	out := resize(t, ns, "busy", "cpu=200m", "cpu=400m")
	p = waitPod(t, ns, "busy", 20*time.Second, "the resize done", func(p *corev1.Pod) bool { return resized(p, out.Generation) })
	for file, want := range map[string]string{"cpu.cfs_quota_us": "40000", "cpu.shares": "204"} {
		if got := cgroupFile(t, ns, "busy", "main", "cpu", file); got != want {
			t.Errorf("%s = %s after the resize, want %s", file, got, want)
		}
	}
	if got := p.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceCPU]; got.MilliValue() != 400 {
		t.Errorf("status limits.cpu %s", got.String())
	}
}
