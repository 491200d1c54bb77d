package kubelet

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// In-place resize (KEP 1287), as a v1.37 kubelet does it.
//
// virtual-kubelet passes the resize to the provider: its pod controller calls UpdatePod whenever
// spec.containers differ (podsEqual), and a resize through the pods/resize subresource changes
// spec.containers[].resources. What happens then is this package's own, since virtual-kubelet
// knows nothing of resources: it mirrors pkg/kubelet/allocation (allocation_manager.go,
// handlers.go), pkg/kubelet/status (the resize conditions) and kuberuntime's doPodResizeAction of
// Kubernetes v1.37.2.
//
//   - Each container has allocated resources (what the kubelet admitted: at the start its spec,
//     later an accepted resize) and actuated ones (what its cgroup has). The status reports them
//     as containerStatuses[].allocatedResources (the allocated requests) and
//     containerStatuses[].resources (the actuated requests and limits; the allocated ones for a
//     container that is not running), and the pod's status.allocatedResources and
//     status.resources (their sums). A started container always reports resources: the API server
//     refuses a resize ("Pod running on node without support for resize") of a pod whose first
//     running container's status has none.
//   - A spec that differs from the allocation is a resize. (One whose requests pass the node's
//     whole allocatable never gets here: the API server's PodResizeValidator admission refuses
//     it.) It is Infeasible when the node's policy forbids it (NodeSpec.CPUManagerPolicy "static"
//     or MemoryManagerPolicy "Static" and a Guaranteed pod whose CPU or memory changes, with the
//     kubelet's messages), Deferred when the node's allocatable minus the other pods' allocated
//     requests cannot hold the new requests (with the scheduler's "Node didn't have enough
//     resource: memory, requested: …, used: …, capacity: …"; v1.37 defers every misfit, even one
//     above the whole allocatable), both as the PodResizePending condition. Pending resizes are
//     tried again every resizeRetryPeriod and whenever a pod leaves the node, as a kubelet
//     retries them.
//   - Accepted, it becomes the allocation, PodResizeInProgress is set (observedGeneration: the
//     pod's generation) and the cgroups are changed at once, without restarting anything: memory
//     first, then CPU; limits that grow are raised on the pod's cgroup before its containers',
//     limits that shrink lowered on the containers' before the pod's. A memory limit lowered to
//     or below what the container (or pod) uses now is not written: PodResizeInProgress gets
//     reason Error and the kubelet's message ("cannot decrease memory limits: attempting to set
//     container \"c\" memory limit (N) below current usage (M)"), nothing is OOM-killed, and it
//     is tried again until the usage fits or the resize is changed. Once the cgroups hold the
//     allocation, PodResizeInProgress goes.
//   - Events as a kubelet records them: ResizeStarted, ResizeCompleted, ResizeDeferred,
//     ResizeInfeasible, ResizeError.
//
// Without Config.EnforceResources there are no cgroups: a resize is admitted the same way and
// actuated at once.

// resizeRetryPeriod is how often pending and failed resizes are tried again.
const resizeRetryPeriod = time.Second

// The kubelet's Event reasons for resizes (pkg/kubelet/events).
const (
	eventResizeDeferred   = "ResizeDeferred"
	eventResizeInfeasible = "ResizeInfeasible"
	eventResizeCompleted  = "ResizeCompleted"
	eventResizeStarted    = "ResizeStarted"
	eventResizeError      = "ResizeError"
)

// podCgroup and containerCgroup are the pod's and a container's cgroups, below the driver's root.
func podCgroup(pod *corev1.Pod) string { return "pod" + string(pod.UID) }

func containerCgroup(pod *corev1.Pod, container string) string {
	return podCgroup(pod) + "/" + container
}

// createCgroupsLocked makes the pod's and its containers' cgroups with the allocated resources,
// before the containers start.
func (p *podRuntime) createCgroupsLocked() error {
	cg := p.k.cg
	if cg == nil {
		return nil
	}
	if err := cg.create(podCgroup(p.pod)); err != nil {
		return err
	}
	if err := cg.set(podCgroup(p.pod), podCgroupConfig(p.allocatedLocked())); err != nil {
		return err
	}
	for _, c := range p.containers {
		rel := containerCgroup(p.pod, c.spec.Name)
		if err := cg.create(rel); err != nil {
			return err
		}
		if err := cg.set(rel, containerCgroupConfig(c.allocated)); err != nil {
			return err
		}
	}
	p.cgroups = true
	return nil
}

// createCgroups is createCgroupsLocked with the lock, and the actuated resources recorded.
func (p *podRuntime) createCgroups() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.createCgroupsLocked(); err != nil {
		return fmt.Errorf("%s: %w", p.k.cg.version(), err)
	}
	for _, c := range p.containers {
		c.actuated = c.allocated.DeepCopy()
	}
	return nil
}

// cgroupJoinScript is the shell lines that move the container's command, before it makes any
// other process, into its cgroup (buildCommand's script runs them first). Empty without
// enforcement.
func (p *podRuntime) cgroupJoinScript(container string) string {
	if p.k.cg == nil {
		return ""
	}
	p.mu.Lock()
	rel := containerCgroup(p.pod, container)
	p.mu.Unlock()
	return joinCgroupScript(p.k.cg.procFiles(rel))
}

// inCgroup wraps argv, a process of container, so that it runs in the container's cgroup, as a
// container runtime runs a container's exec probes, hooks and `kubectl exec` sessions: they count
// against its limits. Unchanged without enforcement.
func (p *podRuntime) inCgroup(container string, argv []string) []string {
	if p.k.cg == nil {
		return argv
	}
	p.mu.Lock()
	rel := containerCgroup(p.pod, container)
	p.mu.Unlock()
	return joinCgroupArgv(p.k.cg.procFiles(rel), argv)
}

// oomKilled tells whether the kernel OOM-killed a process of the container: its cgroup counts it.
func (p *podRuntime) oomKilled(container string) bool {
	if p.k.cg == nil {
		return false
	}
	p.mu.Lock()
	rel, ok := containerCgroup(p.pod, container), p.cgroups
	p.mu.Unlock()
	if !ok {
		return false
	}
	n, err := p.k.cg.oomKills(rel)
	if err != nil {
		klog.V(2).InfoS("read OOM kills", "pod", p.key, "container", container, "err", err)
	}
	return n > 0
}

// killCgroup SIGKILLs every process left in the container's cgroup: when its main process ends,
// the runtime tears the whole container down.
func (p *podRuntime) killCgroup(container string) {
	if p.k.cg == nil {
		return
	}
	p.mu.Lock()
	rel, ok := containerCgroup(p.pod, container), p.cgroups
	p.mu.Unlock()
	if ok {
		for _, pid := range p.k.cg.pids(rel) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroups removes the pod's cgroups once it is released.
func (p *podRuntime) removeCgroups() {
	p.mu.Lock()
	ok, rel := p.cgroups, podCgroup(p.pod)
	p.cgroups = false
	p.mu.Unlock()
	if ok && p.k.cg != nil {
		if err := p.k.cg.remove(rel); err != nil {
			klog.V(2).InfoS("remove pod cgroups", "pod", p.key, "err", err)
		}
	}
}

func (p *podRuntime) allocatedLocked() []corev1.ResourceRequirements {
	out := make([]corev1.ResourceRequirements, 0, len(p.containers))
	for _, c := range p.containers {
		out = append(out, c.allocated)
	}
	return out
}

// activeLocked tells whether the pod still holds its node's resources: not released, not
// terminating to the end, some container not exited.
func (p *podRuntime) activeLocked() bool {
	if p.gone || p.finished || p.lost || p.replaced {
		return false
	}
	for _, c := range p.containers {
		if !c.exited {
			return true
		}
	}
	return false
}

// allocatedRequests sums the allocated requests of the active pods of node but except.
func (k *Kubelet) allocatedRequests(node string, except *podRuntime) (milliCPU, memory int64) {
	for _, o := range k.podsOn(node) {
		if o == except {
			continue
		}
		o.mu.Lock()
		if o.activeLocked() {
			for _, c := range o.containers {
				milliCPU += c.allocated.Requests.Cpu().MilliValue()
				memory += c.allocated.Requests.Memory().Value()
			}
		}
		o.mu.Unlock()
	}
	return milliCPU, memory
}

func (k *Kubelet) nodeSpec(name string) NodeSpec {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ns, ok := k.nodes[name]; ok {
		return ns.spec
	}
	return NodeSpec{}
}

// resizeLoop tries pending and failed resizes again, as a kubelet retries them on its pod syncs,
// every resizeRetryPeriod and as soon as a pod leaves (resizeRetry).
func (k *Kubelet) resizeLoop() {
	t := time.NewTicker(resizeRetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-t.C:
		case <-k.resizeKick:
		}
		k.mu.Lock()
		pods := make([]*podRuntime, 0, len(k.pods))
		for _, p := range k.pods {
			pods = append(pods, p)
		}
		k.mu.Unlock()
		for _, p := range pods {
			if p.resizeUnsettled() {
				k.syncResize(p)
			}
		}
	}
}

// resizeRetry asks resizeLoop for a pass now (a pod left and freed its resources).
func (k *Kubelet) resizeRetry() {
	select {
	case k.resizeKick <- struct{}{}:
	default:
	}
}

// resizeUnsettled tells whether the pod has a resize pending or not yet actuated.
func (p *podRuntime) resizeUnsettled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resizePending != nil || p.resizeInProgress != nil
}

// syncResize brings the pod's allocation and cgroups towards its spec. One pod at a time per
// Kubelet, so two resizes never share the same free room.
func (k *Kubelet) syncResize(p *podRuntime) {
	k.allocMu.Lock()
	defer k.allocMu.Unlock()
	usedCPU, usedMem := k.allocatedRequests(p.node, p)
	node := k.nodeSpec(p.node)
	events := p.resize(node, usedCPU, usedMem)
	if len(events) > 0 {
		k.recordEvents(p, events)
	}
	p.changed()
}

type podEvent struct {
	typ, reason, message string
}

func (k *Kubelet) recordEvents(p *podRuntime, events []podEvent) {
	k.mu.Lock()
	var rec record.EventRecorder
	if ns, ok := k.nodes[p.node]; ok && ns.recorder != nil {
		rec = ns.recorder
	}
	k.mu.Unlock()
	if rec == nil {
		return
	}
	pod := p.podCopy()
	for _, e := range events {
		rec.Event(pod, e.typ, e.reason, e.message)
	}
}

// resize is one pass of syncResize on the pod: allocate what the spec asks if the node allows it,
// then actuate the allocation. usedCPU and usedMem are the other active pods' allocated
// requests on the node.
func (p *podRuntime) resize(node NodeSpec, usedCPU, usedMem int64) []podEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.activeLocked() || p.terminating {
		return nil
	}
	var events []podEvent
	gen := p.pod.Generation
	desired := make([]corev1.ResourceRequirements, len(p.containers))
	changed := false
	for i, c := range p.containers {
		desired[i] = *specResources(p.pod, c.spec.Name).DeepCopy()
		if !apiequality.Semantic.DeepEqual(desired[i], c.allocated) {
			changed = true
		}
	}
	switch {
	case !changed:
		// Nothing to allocate; a pending resize was reverted.
		p.resizePending = nil
	default:
		reason, message := p.infeasibleLocked(node, desired)
		if reason == "" {
			reason, message = fits(node, desired, usedCPU, usedMem)
		}
		if reason != "" {
			prev := p.resizePending
			p.resizePending = resizeCondition(corev1.PodResizePending, prev, reason, message, gen)
			if prev == nil || prev.Reason != reason || prev.ObservedGeneration != gen {
				ev := eventResizeDeferred
				if reason == corev1.PodReasonInfeasible {
					ev = eventResizeInfeasible
				}
				events = append(events, podEvent{corev1.EventTypeWarning, ev, resizeMessage(p.pod, gen, message, "Pod resize "+reason)})
			}
			break
		}
		for i, c := range p.containers {
			c.allocated = desired[i]
		}
		p.resizePending = nil
		// A new resize restarts the in-progress condition at this generation.
		p.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, nil, "", "", gen)
		events = append(events, podEvent{corev1.EventTypeNormal, eventResizeStarted, resizeMessage(p.pod, gen, "", "Pod resize started")})
	}
	if !p.actuatedLocked() {
		if p.resizeInProgress == nil {
			p.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, nil, "", "", gen)
		}
		if err := p.actuateLocked(); err != nil {
			prev := p.resizeInProgress
			p.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, prev, corev1.PodReasonError, err.Error(), prev.ObservedGeneration)
			if prev.Reason != corev1.PodReasonError || prev.Message != err.Error() {
				events = append(events, podEvent{corev1.EventTypeWarning, eventResizeError, resizeMessage(p.pod, prev.ObservedGeneration, err.Error(), "Pod resize error")})
			}
			return events
		}
	}
	if p.resizeInProgress != nil {
		events = append(events, podEvent{corev1.EventTypeNormal, eventResizeCompleted, resizeMessage(p.pod, p.resizeInProgress.ObservedGeneration, "", "Pod resize completed")})
		p.resizeInProgress = nil
	}
	return events
}

// specResources is container's resources in the pod's spec.
func specResources(pod *corev1.Pod, container string) *corev1.ResourceRequirements {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			return &pod.Spec.Containers[i].Resources
		}
	}
	return &corev1.ResourceRequirements{}
}

// infeasibleLocked is the kubelet's podResizesAdmitHandler for the policies a NodeSpec can have:
// with the static CPU (or memory) manager policy, a Guaranteed pod's CPU (or memory) cannot be
// resized (without the InPlacePodVerticalScalingExclusiveCPUs / ...ExclusiveMemory alpha gates).
func (p *podRuntime) infeasibleLocked(node NodeSpec, desired []corev1.ResourceRequirements) (reason, message string) {
	if p.pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		return "", ""
	}
	changes := func(name corev1.ResourceName) bool {
		for i, c := range p.containers {
			if !desired[i].Requests[name].Equal(c.allocated.Requests[name]) || !desired[i].Limits[name].Equal(c.allocated.Limits[name]) {
				return true
			}
		}
		return false
	}
	switch {
	case node.CPUManagerPolicy == "static" && changes(corev1.ResourceCPU):
		return corev1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`
	case node.MemoryManagerPolicy == "Static" && changes(corev1.ResourceMemory):
		return corev1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"`
	}
	return "", ""
}

// fits is the kubelet's admission of a resize (the scheduler's NodeResourcesFit, as the kubelet's
// predicateAdmitHandler runs it): the pod's new requests against the node's allocatable less the
// other pods' allocated requests. A misfit is Deferred, whatever its size: the status manager
// turns every pending reason but Infeasible into Deferred. CPU is checked first, and only the
// first misfit is reported, as the kubelet does.
func fits(node NodeSpec, desired []corev1.ResourceRequirements, usedCPU, usedMem int64) (reason, message string) {
	var cpu, mem int64
	for _, r := range desired {
		cpu += r.Requests.Cpu().MilliValue()
		mem += r.Requests.Memory().Value()
	}
	alloc := nodeAllocatable(node)
	capCPU, capMem := alloc.Cpu().MilliValue(), alloc.Memory().Value()
	msg := "Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d"
	switch {
	case cpu > 0 && cpu > capCPU-usedCPU:
		return corev1.PodReasonDeferred, fmt.Sprintf(msg, corev1.ResourceCPU, cpu, usedCPU, capCPU)
	case mem > 0 && mem > capMem-usedMem:
		return corev1.PodReasonDeferred, fmt.Sprintf(msg, corev1.ResourceMemory, mem, usedMem, capMem)
	}
	return "", ""
}

// actuatedLocked tells whether every container that runs has its allocation in its cgroup. A
// container that has not started gets its cgroup from the allocation when it starts.
func (p *podRuntime) actuatedLocked() bool {
	for _, c := range p.containers {
		if c.actuated != nil && !c.exited && !apiequality.Semantic.DeepEqual(*c.actuated, c.allocated) {
			return false
		}
	}
	return true
}

// actuateLocked writes the allocation to the cgroups, in a kubelet's order (doPodResizeAction):
// memory, then CPU; for each, a growing pod limit before the containers, a shrinking one after.
// A memory limit that would fall to or below the current usage is refused first, before anything
// is written (validateMemoryResizeAction), with the kubelet's message.
func (p *podRuntime) actuateLocked() error {
	cg := p.k.cg
	if cg == nil || !p.cgroups {
		for _, c := range p.containers {
			if c.actuated != nil {
				c.actuated = c.allocated.DeepCopy()
			}
		}
		return nil
	}
	podRel := podCgroup(p.pod)
	var actual []corev1.ResourceRequirements
	for _, c := range p.containers {
		if c.actuated != nil {
			actual = append(actual, *c.actuated)
		} else {
			actual = append(actual, c.allocated)
		}
	}
	curPod, newPod := podCgroupConfig(actual), podCgroupConfig(p.allocatedLocked())
	if err := p.checkMemoryDecreaseLocked(curPod, newPod); err != nil {
		return err
	}
	// Memory: the pod's limit around its containers'.
	if grows(*newPod.MemoryLimit, *curPod.MemoryLimit) {
		if err := cg.set(podRel, cgroupConfig{MemoryLimit: newPod.MemoryLimit}); err != nil {
			return err
		}
	}
	for _, c := range p.containers {
		if c.actuated == nil || c.exited {
			continue
		}
		want := containerCgroupConfig(c.allocated)
		if err := cg.set(containerCgroup(p.pod, c.spec.Name), cgroupConfig{MemoryLimit: want.MemoryLimit}); err != nil {
			return err
		}
		setResource(c.actuated, c.allocated, corev1.ResourceMemory)
	}
	if !grows(*newPod.MemoryLimit, *curPod.MemoryLimit) {
		if err := cg.set(podRel, cgroupConfig{MemoryLimit: newPod.MemoryLimit}); err != nil {
			return err
		}
	}
	// CPU: quota (limits) and shares (requests), the pod's around its containers'.
	if grows(*newPod.CPUQuota, *curPod.CPUQuota) {
		if err := cg.set(podRel, cgroupConfig{CPUQuota: newPod.CPUQuota, CPUPeriod: newPod.CPUPeriod}); err != nil {
			return err
		}
	}
	if *newPod.CPUShares > *curPod.CPUShares {
		if err := cg.set(podRel, cgroupConfig{CPUShares: newPod.CPUShares}); err != nil {
			return err
		}
	}
	for _, c := range p.containers {
		if c.actuated == nil || c.exited {
			continue
		}
		want := containerCgroupConfig(c.allocated)
		if err := cg.set(containerCgroup(p.pod, c.spec.Name), cgroupConfig{CPUShares: want.CPUShares, CPUQuota: want.CPUQuota, CPUPeriod: want.CPUPeriod}); err != nil {
			return err
		}
		c.actuated = c.allocated.DeepCopy()
	}
	if err := cg.set(podRel, cgroupConfig{CPUShares: newPod.CPUShares, CPUQuota: newPod.CPUQuota, CPUPeriod: newPod.CPUPeriod}); err != nil {
		return err
	}
	return nil
}

// setResource copies resource name's request and limit from src to dst.
func setResource(dst *corev1.ResourceRequirements, src corev1.ResourceRequirements, name corev1.ResourceName) {
	for _, l := range []struct {
		dst *corev1.ResourceList
		src corev1.ResourceList
	}{{&dst.Requests, src.Requests}, {&dst.Limits, src.Limits}} {
		if q, ok := l.src[name]; ok {
			if *l.dst == nil {
				*l.dst = corev1.ResourceList{}
			}
			(*l.dst)[name] = q.DeepCopy()
		} else {
			delete(*l.dst, name)
		}
	}
}

// grows tells whether limit next is above cur, -1 being no limit.
func grows(next, cur int64) bool {
	if next < 0 {
		return cur >= 0
	}
	return cur >= 0 && next > cur
}

// checkMemoryDecreaseLocked is a kubelet's validateMemoryResizeAction: a memory limit that falls
// (or appears) must stay above the current usage, else nothing of the resize is written.
func (p *podRuntime) checkMemoryDecreaseLocked(curPod, newPod cgroupConfig) error {
	cg := p.k.cg
	var errs []string
	if *newPod.MemoryLimit >= 0 && (*curPod.MemoryLimit < 0 || *newPod.MemoryLimit < *curPod.MemoryLimit) {
		usage, err := cg.memoryUsage(podCgroup(p.pod))
		switch {
		case err != nil:
			errs = append(errs, "missing pod memory usage")
		case usage >= *newPod.MemoryLimit:
			errs = append(errs, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", *newPod.MemoryLimit, usage))
		}
	}
	for _, c := range p.containers {
		if c.actuated == nil || c.exited {
			continue
		}
		want, cur := containerCgroupConfig(c.allocated), containerCgroupConfig(*c.actuated)
		if *want.MemoryLimit < 0 || (*cur.MemoryLimit >= 0 && *want.MemoryLimit >= *cur.MemoryLimit) {
			continue
		}
		usage, err := cg.memoryUsage(containerCgroup(p.pod, c.spec.Name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("missing container %q memory usage", c.spec.Name))
		case usage >= *want.MemoryLimit:
			errs = append(errs, fmt.Sprintf("attempting to set container %q memory limit (%d) below current usage (%d)", c.spec.Name, *want.MemoryLimit, usage))
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cannot decrease memory limits: %s", errs[0])
	default:
		// utilerrors.NewAggregate's form for several.
		return fmt.Errorf("cannot decrease memory limits: [%s]", strings.Join(errs, ", "))
	}
}

// resizeCondition is a kubelet's updatedPodResizeCondition: the transition time stays while the
// reason does.
func resizeCondition(typ corev1.PodConditionType, old *corev1.PodCondition, reason, message string, gen int64) *corev1.PodCondition {
	now := metav1.Now()
	c := &corev1.PodCondition{
		Type: typ, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now,
		ObservedGeneration: gen, Reason: reason, Message: message,
	}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// resizeMessage is a kubelet's podResizeMessage: a prefix and the desired resources, as JSON.
func resizeMessage(pod *corev1.Pod, gen int64, errMsg, prefix string) string {
	type alloc struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		Containers []alloc `json:"containers,omitempty"`
		Generation int64   `json:"generation"`
		Error      string  `json:"error,omitempty"`
	}{Generation: gen, Error: errMsg}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, alloc{Name: c.Name, Resources: c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}

// nodeAllocatable is the node's allocatable CPU and memory: NodeSpec.Allocatable over the default.
func nodeAllocatable(n NodeSpec) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(defaultNodeCPU),
		corev1.ResourceMemory: resource.MustParse(defaultNodeMemory),
	}
	for name, q := range n.Allocatable {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// The allocatable CPU and memory of a Node without NodeSpec.Allocatable.
const (
	defaultNodeCPU    = "64"
	defaultNodeMemory = "256Gi"
)

// statusResources fills the resource fields of the status: each started container's resources
// (actuated while it runs, else allocated) and allocatedResources, and the pod's sums.
func (p *podRuntime) statusResourcesLocked(st *corev1.PodStatus) {
	podReq, podAlloc, podLim := corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}
	limitsSet := map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true}
	for i, c := range p.containers {
		var res corev1.ResourceRequirements
		if c.actuated != nil && c.started && !c.exited {
			res = *c.actuated.DeepCopy()
		} else {
			res = *c.allocated.DeepCopy()
		}
		add(podReq, res.Requests)
		add(podAlloc, c.allocated.Requests)
		add(podLim, res.Limits)
		for name := range limitsSet {
			if _, ok := res.Limits[name]; !ok {
				limitsSet[name] = false
			}
		}
		if !c.started {
			continue // a container the runtime has not created yet reports neither
		}
		cs := &st.ContainerStatuses[i]
		cs.Resources = &res
		cs.AllocatedResources = c.allocated.Requests.DeepCopy()
	}
	for name, ok := range limitsSet {
		if !ok {
			delete(podLim, name)
		}
	}
	st.AllocatedResources = podAlloc
	st.Resources = &corev1.ResourceRequirements{Requests: podReq, Limits: podLim}
}

func add(sum, l corev1.ResourceList) {
	for name, q := range l {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			continue
		}
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}
