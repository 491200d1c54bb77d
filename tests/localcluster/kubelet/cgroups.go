package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Resource enforcement: with Config.EnforceResources, each container's processes run in a cgroup
// of their own, below a cgroup of their pod, as a kubelet lays them out (kubepods/pod<uid>/<id>):
//
//	<the kubelet process's own cgroup>/valkey-localcluster-<bridge>/pod<uid>/<container name>
//
// in every controller used, so that several local clusters (one per slot, each with its own
// bridge) never share one. The container's cgroup has the limits of its resources, the pod's the
// sum of its containers' where every container sets one, as a kubelet computes them
// (ResourceConfigForPod): memory.limit_in_bytes (and memory.memsw.limit_in_bytes, so that swap
// cannot stretch it) from limits.memory, cpu.cfs_quota_us over a 100 ms cpu.cfs_period_us from
// limits.cpu, cpu.shares from requests.cpu (2 without a request).
//
// The cgroups are created under the kubelet's own cgroup, not at the hierarchy's root: a session
// that runs the tests may itself be confined to a cgroup (on the machines this project runs on,
// memory:/process_api/<id>), and its processes stay inside it, counted against its limits.
//
// Which cgroup version: this machine (Debian 12, kernel 6.18, 2026-12) mounts the cgroup v1
// controllers one per hierarchy at /sys/fs/cgroup/{memory,cpu,cpuacct,pids,...} and a cgroup v2
// hierarchy at /sys/fs/cgroup/unified whose cgroup.controllers is empty: every controller is
// bound to a v1 hierarchy, and a controller is in one hierarchy only, so v2 can limit nothing
// here. Only v1 is written (cgroupV1); cgroupDriver is what a v2 driver would implement
// (memory.max, cpu.max, cpu.weight, memory.events' oom_kill), chosen in newCgroupDriver by what
// the machine offers. Without the v1 memory or cpu controller Start fails and names it, rather
// than run pods that claim limits nothing enforces.
type cgroupDriver interface {
	// version is "cgroup v1" or "cgroup v2", for messages.
	version() string
	// create makes the cgroup rel (slash-separated, below the driver's root) in every
	// controller, without limits.
	create(rel string) error
	// procFiles are the files a process writes its own pid to, to join rel in every controller.
	procFiles(rel string) []string
	// set writes the settings of r that are not nil.
	set(rel string, r cgroupConfig) error
	// get reads rel's settings.
	get(rel string) (cgroupConfig, error)
	// memoryUsage is the memory charged to rel, page cache included (what a kubelet compares a
	// lower memory limit with before it writes it).
	memoryUsage(rel string) (int64, error)
	// oomKills counts the processes of rel the kernel killed because rel or one of its
	// ancestors ran out of memory.
	oomKills(rel string) (int64, error)
	// pids lists the processes in rel (and below it).
	pids(rel string) []int
	// remove removes rel and everything below it, SIGKILLing what still runs there.
	remove(rel string) error
	// dir is rel's directory in the named controller ("memory", "cpu"), for tests.
	dir(rel, controller string) (string, error)
}

// cgroupConfig is a cgroup's CPU and memory settings, nil where not set or not read.
type cgroupConfig struct {
	// MemoryLimit in bytes; -1 is no limit.
	MemoryLimit *int64
	CPUShares   *uint64
	// CPUQuota in microseconds per CPUPeriod; -1 is no limit.
	CPUQuota  *int64
	CPUPeriod *uint64
}

// The kubelet's conversions of CPU and memory to cgroup settings (pkg/kubelet/cm/helpers_linux.go).
const (
	cpuPeriod      = 100000 // µs: a kubelet's default cpu.cfs_period_us
	minCPUQuota    = 1000   // µs: the kernel's minimum quota
	minCPUShares   = 2
	maxCPUShares   = 262144
	sharesPerCPU   = 1024
	milliCPUPerCPU = 1000
	// noMemoryLimit reads back from memory.limit_in_bytes at or above this: the kernel's
	// "unlimited" is PAGE_COUNTER_MAX pages, 9223372036854771712 bytes with 4 KiB pages.
	noMemoryLimit = int64(1) << 62
)

// milliCPUToShares is a kubelet's MilliCPUToShares.
func milliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return minCPUShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUPerCPU
	return uint64(min(max(shares, minCPUShares), maxCPUShares))
}

// milliCPUToQuota is a kubelet's MilliCPUToQuota: -1 (no quota) without a limit.
func milliCPUToQuota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return -1
	}
	return max(milliCPU*cpuPeriod/milliCPUPerCPU, minCPUQuota)
}

// containerCgroupConfig is what a container's cgroup gets for resources r.
func containerCgroupConfig(r corev1.ResourceRequirements) cgroupConfig {
	mem := int64(-1)
	if q, ok := r.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
		mem = q.Value()
	}
	var req, lim int64
	if q, ok := r.Requests[corev1.ResourceCPU]; ok {
		req = q.MilliValue()
	}
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		lim = q.MilliValue()
	}
	return cgroupConfig{MemoryLimit: &mem, CPUShares: new(milliCPUToShares(req)), CPUQuota: new(milliCPUToQuota(lim)), CPUPeriod: new(uint64(cpuPeriod))}
}

// podCgroupConfig is what the pod's cgroup gets for its containers' resources: the sums of the
// limits where every container sets one (else none), the sum of the CPU requests, as a kubelet's
// ResourceConfigForPod.
func podCgroupConfig(containers []corev1.ResourceRequirements) cgroupConfig {
	var mem, req, lim int64
	memSet, cpuSet := true, true
	for _, r := range containers {
		if q, ok := r.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
			mem += q.Value()
		} else {
			memSet = false
		}
		if q, ok := r.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
			lim += q.MilliValue()
		} else {
			cpuSet = false
		}
		if q, ok := r.Requests[corev1.ResourceCPU]; ok {
			req += q.MilliValue()
		}
	}
	if !memSet || len(containers) == 0 {
		mem = -1
	}
	quota := int64(-1)
	if cpuSet && len(containers) > 0 {
		quota = milliCPUToQuota(lim)
	}
	return cgroupConfig{MemoryLimit: &mem, CPUShares: new(milliCPUToShares(req)), CPUQuota: &quota, CPUPeriod: new(uint64(cpuPeriod))}
}

// newCgroupDriver finds the cgroup controllers this process may use and makes the root of its
// cgroups, name, below its own cgroup in each (see cgroupDriver). A root of that name left by a
// killed run (its processes died with it, or are killed now) is removed first.
func newCgroupDriver(name string, shares uint64) (cgroupDriver, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("kubelet: resource enforcement: %w", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("kubelet: resource enforcement: %w", err)
	}
	d := &cgroupV1{roots: map[string]string{}}
	for _, ctl := range cgroupV1Controllers {
		dir, err := v1ControllerDir(string(self), string(mounts), ctl.name)
		if err != nil {
			return nil, fmt.Errorf("kubelet: resource enforcement needs the cgroup v1 %s controller (%s): %w%s",
				ctl.name, strings.Join(ctl.files, ", "), err, v2Note(string(mounts)))
		}
		for _, f := range ctl.files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return nil, fmt.Errorf("kubelet: resource enforcement needs the cgroup v1 %s controller's %s: %w", ctl.name, f, err)
			}
		}
		d.roots[ctl.name] = filepath.Join(dir, name)
	}
	if err := d.remove(""); err != nil {
		return nil, fmt.Errorf("kubelet: resource enforcement: the cgroups of an earlier run: %w", err)
	}
	if err := d.create(""); err != nil {
		return nil, fmt.Errorf("kubelet: resource enforcement: %w", err)
	}
	// Writable, not only creatable: an unlimited limit changes nothing. The root weighs shares:
	// its Nodes' allocatable CPU, as a kubelet weighs its kubepods cgroup. With less (a weight of
	// two processes, tried), three local clusters' pods beside their control planes and tests
	// on a saturated machine stalled for seconds: a slot's reshard took 1 105 s instead of 636,
	// and writes were refused for 5.5 s. Each pod is still bounded by its own CPU limit.
	if err := d.set("", cgroupConfig{MemoryLimit: new(int64(-1)), CPUQuota: new(int64(-1)), CPUShares: &shares}); err != nil {
		_ = d.remove("")
		return nil, fmt.Errorf("kubelet: resource enforcement: %w", err)
	}
	return d, nil
}

// v2Note says what the machine's cgroup v2 hierarchy offers, for the error that v1 is missing.
func v2Note(mountinfo string) string {
	for line := range strings.Lines(mountinfo) {
		mnt, fstype, _, ok := parseMountinfo(line)
		if !ok || fstype != "cgroup2" {
			continue
		}
		ctls, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers"))
		if err != nil {
			continue
		}
		return fmt.Sprintf(" (cgroup v2 at %s offers controllers %q; this kubelet writes cgroup v1 only, see cgroups.go)",
			mnt, strings.TrimSpace(string(ctls)))
	}
	return ""
}

// cgroupV1Controllers are the v1 controllers used and the files each must have.
var cgroupV1Controllers = []struct {
	name  string
	files []string
}{
	{"memory", []string{"memory.limit_in_bytes", "memory.usage_in_bytes", "memory.oom_control"}},
	{"cpu", []string{"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"}},
}

// v1ControllerDir is this process's cgroup directory in the v1 hierarchy of controller ctl.
func v1ControllerDir(selfCgroup, mountinfo, ctl string) (string, error) {
	var path string
	found := false
	for line := range strings.Lines(selfCgroup) {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), ctl) {
			path, found = parts[2], true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("no cgroup v1 hierarchy has it (/proc/self/cgroup)")
	}
	for line := range strings.Lines(mountinfo) {
		mnt, fstype, opts, ok := parseMountinfo(line)
		if !ok || fstype != "cgroup" || !slices.Contains(opts, ctl) {
			continue
		}
		root := strings.Fields(line)[3] // the hierarchy's path mounted there
		rel, ok := strings.CutPrefix(path, root)
		if !ok {
			continue
		}
		return filepath.Join(mnt, rel), nil
	}
	return "", fmt.Errorf("its hierarchy is not mounted (/proc/self/mountinfo)")
}

// parseMountinfo returns a /proc/self/mountinfo line's mount point, file system type and
// super options.
func parseMountinfo(line string) (mnt, fstype string, superOpts []string, ok bool) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if sep < 5 || len(f) < sep+4 {
		return "", "", nil, false
	}
	return f[4], f[sep+1], strings.Split(f[sep+3], ","), true
}

// cgroupV1 is cgroupDriver on cgroup v1: one directory per controller.
type cgroupV1 struct {
	roots map[string]string // controller -> root directory
}

func (d *cgroupV1) version() string { return "cgroup v1" }

func (d *cgroupV1) path(ctl, rel string, file ...string) string {
	return filepath.Join(append([]string{d.roots[ctl], filepath.FromSlash(rel)}, file...)...)
}

func (d *cgroupV1) dir(rel, controller string) (string, error) {
	if _, ok := d.roots[controller]; !ok {
		return "", fmt.Errorf("kubelet: no %s controller in use", controller)
	}
	return d.path(controller, rel), nil
}

func (d *cgroupV1) create(rel string) error {
	for _, ctl := range cgroupV1Controllers {
		if err := os.MkdirAll(d.path(ctl.name, rel), 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", ctl.name, err)
		}
	}
	return nil
}

func (d *cgroupV1) procFiles(rel string) []string {
	var out []string
	for _, ctl := range cgroupV1Controllers {
		out = append(out, d.path(ctl.name, rel, "cgroup.procs"))
	}
	return out
}

func (d *cgroupV1) set(rel string, r cgroupConfig) error {
	if r.MemoryLimit != nil {
		if err := d.setMemoryLimit(rel, *r.MemoryLimit); err != nil {
			return err
		}
	}
	if r.CPUShares != nil {
		if err := writeInt(d.path("cpu", rel, "cpu.shares"), int64(*r.CPUShares)); err != nil {
			return err
		}
	}
	if r.CPUPeriod != nil {
		if err := writeInt(d.path("cpu", rel, "cpu.cfs_period_us"), int64(*r.CPUPeriod)); err != nil {
			return err
		}
	}
	if r.CPUQuota != nil {
		if err := writeInt(d.path("cpu", rel, "cpu.cfs_quota_us"), *r.CPUQuota); err != nil {
			return err
		}
	}
	return nil
}

// setMemoryLimit writes memory.limit_in_bytes and, where the kernel has it (swap accounting),
// memory.memsw.limit_in_bytes to the same value: memory and swap together may not pass the
// limit, so swap cannot stretch it. The kernel keeps memsw at or above the memory limit, so a
// rise writes memsw first and a fall last. A fall below what the cgroup uses makes the kernel
// reclaim, and fail with EBUSY when it cannot; callers check the usage first, as a kubelet does.
func (d *cgroupV1) setMemoryLimit(rel string, limit int64) error {
	memFile, swFile := d.path("memory", rel, "memory.limit_in_bytes"), d.path("memory", rel, "memory.memsw.limit_in_bytes")
	_, err := os.Stat(swFile)
	hasSwap := err == nil
	cur, err := readInt(memFile)
	if err != nil {
		return err
	}
	rising := limit < 0 || limit >= cur
	if hasSwap && rising {
		if err := writeInt(swFile, limit); err != nil {
			return err
		}
	}
	if err := writeInt(memFile, limit); err != nil {
		return err
	}
	if hasSwap && !rising {
		return writeInt(swFile, limit)
	}
	return nil
}

func (d *cgroupV1) get(rel string) (cgroupConfig, error) {
	var r cgroupConfig
	mem, err := readInt(d.path("memory", rel, "memory.limit_in_bytes"))
	if err != nil {
		return r, err
	}
	if mem >= noMemoryLimit {
		mem = -1
	}
	shares, err := readInt(d.path("cpu", rel, "cpu.shares"))
	if err != nil {
		return r, err
	}
	quota, err := readInt(d.path("cpu", rel, "cpu.cfs_quota_us"))
	if err != nil {
		return r, err
	}
	period, err := readInt(d.path("cpu", rel, "cpu.cfs_period_us"))
	if err != nil {
		return r, err
	}
	return cgroupConfig{MemoryLimit: &mem, CPUShares: new(uint64(shares)), CPUQuota: &quota, CPUPeriod: new(uint64(period))}, nil
}

func (d *cgroupV1) memoryUsage(rel string) (int64, error) {
	return readInt(d.path("memory", rel, "memory.usage_in_bytes"))
}

// oomKills reads "oom_kill N" of memory.oom_control (kernel 4.13 and later): the kernel counts a
// kill in the killed process's cgroup and its ancestors, whichever of them ran out of memory.
func (d *cgroupV1) oomKills(rel string) (int64, error) {
	data, err := os.ReadFile(d.path("memory", rel, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("memory.oom_control has no oom_kill count (kernel older than 4.13)")
}

func (d *cgroupV1) pids(rel string) []int {
	seen := map[int]bool{}
	var out []int
	for _, ctl := range cgroupV1Controllers {
		_ = filepath.WalkDir(d.path(ctl.name, rel), func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for f := range strings.FieldsSeq(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// remove kills what runs in rel and removes its directories, deepest first. A cgroup with a
// process in it cannot be removed; a process killed leaves it a moment later, so rmdir is
// retried for a few seconds.
func (d *cgroupV1) remove(rel string) error {
	for _, pid := range d.pids(rel) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	var errs []error
	for _, ctl := range cgroupV1Controllers {
		var dirs []string
		_ = filepath.WalkDir(d.path(ctl.name, rel), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, dir := range slices.Backward(dirs) {
			if err := rmdirRetry(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func rmdirRetry(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

func writeInt(path string, v int64) error {
	if err := os.WriteFile(path, []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("write %d to %s: %w", v, path, err)
	}
	return nil
}

// joinCgroupArgv runs argv in the cgroup whose procFiles are given: a shell writes its own pid
// into each (joinCgroupScript), then execs argv, so every process it makes is in the cgroup
// (cgroup v1 has no way to start a process inside a cgroup; v2's clone3 CLONE_INTO_CGROUP, Go's
// SysProcAttr.UseCgroupFD, would do without the shell).
func joinCgroupArgv(procFiles []string, argv []string) []string {
	return append([]string{"/bin/sh", "-c", joinCgroupScript(procFiles) + `exec "$@"`, "sh"}, argv...)
}

// joinCgroupScript is the shell lines that move the shell into the cgroup whose procFiles are
// given, or make it exit 126.
func joinCgroupScript(procFiles []string) string {
	var script strings.Builder
	for _, f := range procFiles {
		fmt.Fprintf(&script, "echo $$ > %s || exit 126\n", shellQuote(f))
	}
	return script.String()
}
