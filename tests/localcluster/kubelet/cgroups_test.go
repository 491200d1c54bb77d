package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestV1ControllerDir finds the process's own cgroup directory in layouts seen on machines: one
// controller per hierarchy (this project's machines, the session confined in memory), cpu and
// cpuacct sharing one, and a hierarchy mounted from below its root (a cgroup namespace).
func TestV1ControllerDir(t *testing.T) {
	const self = `9:name=systemd:/
4:memory:/process_api/abc
2:cpu,cpuacct:/
1:pids:/ns/inner
0::/
`
	const mounts = `25 21 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct
28 25 0:25 /ns /sys/fs/cgroup/pids rw,relatime shared:11 - cgroup cgroup rw,pids
29 25 0:26 / /sys/fs/cgroup/unified rw,relatime shared:12 - cgroup2 cgroup2 rw
`
	for ctl, want := range map[string]string{
		"memory":  "/sys/fs/cgroup/memory/process_api/abc",
		"cpu":     "/sys/fs/cgroup/cpu,cpuacct",
		"cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
		"pids":    "/sys/fs/cgroup/pids/inner",
	} {
		got, err := v1ControllerDir(self, mounts, ctl)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", ctl, got, err, want)
		}
	}
	if _, err := v1ControllerDir(self, mounts, "blkio"); err == nil || !strings.Contains(err.Error(), "no cgroup v1 hierarchy") {
		t.Errorf("blkio: %v, want no hierarchy", err)
	}
	if _, err := v1ControllerDir("3:blkio:/\n", mounts, "blkio"); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("blkio unmounted: %v", err)
	}
}

// TestCgroupConfig: the kubelet's conversions (pkg/kubelet/cm: MilliCPUToShares,
// MilliCPUToQuota, ResourceConfigForPod's sums).
func TestCgroupConfig(t *testing.T) {
	rr := func(req, lim string) corev1.ResourceRequirements {
		parse := func(s string) corev1.ResourceList {
			out := corev1.ResourceList{}
			for kv := range strings.SplitSeq(s, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					out[corev1.ResourceName(k)] = resource.MustParse(v)
				}
			}
			return out
		}
		return corev1.ResourceRequirements{Requests: parse(req), Limits: parse(lim)}
	}
	c := containerCgroupConfig(rr("cpu=50m,memory=128Mi", "cpu=50m,memory=128Mi"))
	if *c.MemoryLimit != 128<<20 || *c.CPUShares != 51 || *c.CPUQuota != 5000 || *c.CPUPeriod != 100000 {
		t.Errorf("50m/128Mi: %d %d %d %d", *c.MemoryLimit, *c.CPUShares, *c.CPUQuota, *c.CPUPeriod)
	}
	c = containerCgroupConfig(rr("", ""))
	if *c.MemoryLimit != -1 || *c.CPUShares != 2 || *c.CPUQuota != -1 {
		t.Errorf("best effort: %d %d %d", *c.MemoryLimit, *c.CPUShares, *c.CPUQuota)
	}
	if q := milliCPUToQuota(5); q != 1000 {
		t.Errorf("5m: quota %d, want the 1 ms minimum", q)
	}
	p := podCgroupConfig([]corev1.ResourceRequirements{rr("cpu=100m", "cpu=200m,memory=64Mi"), rr("cpu=300m", "cpu=1,memory=1Gi")})
	if *p.MemoryLimit != 64<<20+1<<30 || *p.CPUShares != 409 || *p.CPUQuota != 120000 {
		t.Errorf("pod of two: %d %d %d", *p.MemoryLimit, *p.CPUShares, *p.CPUQuota)
	}
	p = podCgroupConfig([]corev1.ResourceRequirements{rr("", "memory=64Mi"), rr("", "cpu=1")})
	if *p.MemoryLimit != -1 || *p.CPUQuota != -1 {
		t.Errorf("a container without a limit leaves the pod without: %d %d", *p.MemoryLimit, *p.CPUQuota)
	}
}

// TestFits: the kubelet's admission of a resize, with the scheduler's message; CPU first.
func TestFits(t *testing.T) {
	node := NodeSpec{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	want := func(r ...string) []corev1.ResourceRequirements {
		var out []corev1.ResourceRequirements
		for _, s := range r {
			k, v, _ := strings.Cut(s, "=")
			out = append(out, corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(k): resource.MustParse(v)}})
		}
		return out
	}
	if r, m := fits(node, want("memory=600Mi"), 0, 400<<20); r != "" {
		t.Errorf("600Mi beside 400Mi of 1Gi: %s %s", r, m)
	}
	if r, m := fits(node, want("memory=700Mi"), 0, 400<<20); r != corev1.PodReasonDeferred ||
		m != "Node didn't have enough resource: memory, requested: 734003200, used: 419430400, capacity: 1073741824" {
		t.Errorf("700Mi beside 400Mi of 1Gi: %s %q", r, m)
	}
	if r, m := fits(node, want("cpu=3", "memory=2Gi"), 500, 0); r != corev1.PodReasonDeferred ||
		m != "Node didn't have enough resource: cpu, requested: 3000, used: 500, capacity: 2000" {
		t.Errorf("cpu first: %s %q", r, m)
	}
}
