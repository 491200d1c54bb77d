package plan

// The resize planner (updates) brings a node whose spec differs from the current one only in CPU
// and memory to the new size in place, through the pod's resize subresource, instead of the
// rolling replacement (fsm.Snapshot.InPlace says when it can; otherwise the node is outdated and
// the upgrade planner replaces it, as any other change). No pod is replaced, no slot moves, no
// replica resyncs. Its rules, in order:
//
//  1. Only a formed cluster (Active or Upgrading) whose spec resolved (Snapshot.ShapeHash).
//  2. Only live, Active, running nodes that InPlace allows; every one of them in the same pass:
//     a resize is harmless (Kubernetes changes the container's cgroup, the process runs on).
//     A node of the current spec whose pod asks for another size (the spec went back before the
//     resize was recorded, or someone resized the pod by hand) is brought back the same way.
//  3. A node whose kubelet applied the new size (the container's resources in force equal the
//     spec's) has it recorded on its ValkeyNode (RecordSize): its spec hash is then current.
//  4. A node whose pod asks for the new size while its kubelet has not applied it is waited for,
//     saying what the kubelet says (deferred, or its error).
//  5. A node still asking for another size is resized (ResizePod). Growing, the pod first: the
//     settings planner holds a raise of maxmemory on a node whose memory has not grown yet
//     (HoldsMaxmemory). Shrinking memory, maxmemory first: the node must run the maxmemory the
//     spec wants, no more than the new limit, and hold at most fsm.ShrinkHeadroom of the new
//     limit (used_memory_rss); otherwise the shrink is refused (ShrinkRefused: a condition and
//     status.message say why) and the node keeps its size. A shrink the kubelet would carry out
//     below what the process holds would get it OOM-killed, and never happens.

import (
	"fmt"
	"strconv"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"
)

var resize = Planner{Name: "resize", Plan: planResize}

func planResize(in Input) Step {
	s := in.Snapshot
	if (in.State != fsm.Active && in.State != fsm.Upgrading) || s.ShapeHash == "" {
		return Step{}
	}
	var st Step
	var holds []string
	for _, p := range resizing(s) {
		r := p.Resize
		switch {
		case r.Asked.Equal(s.Size) && r.InForce.Equal(s.Size):
			if !p.Size.Equal(s.Size) {
				st.Actions = append(st.Actions, RecordSize{Pod: p.Name, Size: s.Size})
			}
		case r.Asked.Equal(s.Size):
			switch {
			case r.Error != "":
				holds = append(holds, fmt.Sprintf("pod %s: the kubelet has not applied the resize: %s", p.Name, r.Error))
			case r.Pending != "":
				holds = append(holds, fmt.Sprintf("pod %s: the kubelet %s the resize: %s", p.Name, strings.ToLower(r.Pending), r.PendingMessage))
			default:
				holds = append(holds, fmt.Sprintf("resizing pod %s in place", p.Name))
			}
		default:
			if why := shrinkWait(s, p); why != "" {
				holds = append(holds, why)
				continue
			}
			st.Actions = append(st.Actions, ResizePod{Pod: p.Name, To: s.Size, From: r.InForce})
		}
	}
	st.Hold = strings.Join(holds, "; ")
	return st
}

// resizing returns the live, Active, running pods that InPlace allows, and those of the current
// spec whose pod asks for another size than it records: a resize the spec went back on before it
// was recorded (or one made by hand), which goes back to the spec's size the same way.
func resizing(s fsm.Snapshot) []fsm.Pod {
	var out []fsm.Pod
	for _, p := range s.LivePods() {
		if p.Lifecycle != string(v1.LifecycleActive) || p.Phase != fsm.PodRunning || p.Exited {
			continue
		}
		ok, _ := s.InPlace(p)
		back := s.SpecHash != "" && p.SpecHash == s.SpecHash && p.Resize != nil && !p.Resize.Asked.Equal(s.Size) && p.Size.SameQoS(s.Size)
		if ok || back {
			out = append(out, p)
		}
	}
	return out
}

// shrinking reports whether resizing p to the snapshot's size lowers its memory.
func shrinking(s fsm.Snapshot, p fsm.Pod) bool {
	return p.Resize != nil && s.Size.MemoryBytes() < p.Resize.InForce.MemoryBytes()
}

// shrinkWait says why p's memory may not shrink yet ("" when it may, or does not shrink).
func shrinkWait(s fsm.Snapshot, p fsm.Pod) string {
	if !shrinking(s, p) {
		return ""
	}
	if why := shrinkRefused(s, p); why != "" {
		return why
	}
	n := p.Node
	if n == nil || !n.Reachable || n.Config == nil {
		return fmt.Sprintf("pod %s: waiting for its node to answer before shrinking its memory", p.Name)
	}
	if want := wantedMaxmemory(s); want > 0 {
		have, _ := strconv.ParseInt(liveconf.Normalize("maxmemory", n.Config["maxmemory"]), 10, 64)
		if have == 0 || have > want {
			return fmt.Sprintf("pod %s: waiting for maxmemory %s before shrinking its memory", p.Name, s.Settings["maxmemory"])
		}
	}
	return ""
}

// shrinkRefused says why shrinking p's memory to the snapshot's size is refused, "" when it is
// not (or p does not shrink): the maxmemory the spec wants does not fit in the new limit, or the
// node holds more than fsm.ShrinkHeadroom of it.
func shrinkRefused(s fsm.Snapshot, p fsm.Pod) string {
	if !shrinking(s, p) {
		return ""
	}
	if why := shrinkRefusal(s, p); why != "" {
		return fmt.Sprintf("pod %s: %s", p.Name, why)
	}
	return ""
}

// shrinkRefusal is shrinkRefused without the pod's name.
func shrinkRefusal(s fsm.Snapshot, p fsm.Pod) string {
	limit := s.Size.MemoryBytes()
	if want := wantedMaxmemory(s); want > limit {
		return fmt.Sprintf("shrinking memory to %s refused: maxmemory %s does not fit in it; lower maxmemory with it (a lower maxmemory waits for its confirmation: LiveSettingsHeld)", s.Size.Memory, s.Settings["maxmemory"])
	}
	if held := shardHolds(s, p.Shard); float64(held) > fsm.ShrinkHeadroom*float64(limit) {
		return fmt.Sprintf("shrinking memory to %s refused: its shard's nodes hold up to %d MiB (used_memory_rss), more than %d%% of the new limit; delete keys or lower maxmemory first, or keep the size",
			s.Size.Memory, held>>20, int(fsm.ShrinkHeadroom*100))
	}
	return ""
}

// shardHolds is the most any answering live node of shard holds (used_memory_rss): every copy
// of a shard holds its data, and a replica that has not synced yet will.
func shardHolds(s fsm.Snapshot, shard int) int64 {
	var most int64
	for _, p := range s.LivePods() {
		if p.Shard == shard && p.Node != nil && p.Node.Reachable {
			most = max(most, p.Node.UsedMemoryRSS)
		}
	}
	return most
}

// HeldSize is the size a node created now gets while a shrink of the cluster's memory is
// refused (ShrinkRefused): the largest memory its refused nodes run, so that a replacement
// holds what its shard holds instead of being OOM-killed at its first sync. ok is false when no
// shrink is refused (a node created now gets the spec's size).
func HeldSize(s fsm.Snapshot) (size fsm.Size, ok bool) {
	if s.ShapeHash == "" {
		return fsm.Size{}, false
	}
	var most int64
	for _, p := range resizing(s) {
		if p.Resize.Asked.Equal(s.Size) || !shrinking(s, p) || shrinkRefusal(s, p) == "" {
			continue
		}
		if m := p.Resize.InForce.MemoryBytes(); m > most {
			most, size, ok = m, fsm.Size{CPU: s.Size.CPU, Memory: p.Resize.InForce.Memory}, true
		}
	}
	return size, ok
}

// ShrinkRefused says, for the ResizeRefused condition, why the memory of the cluster's nodes is
// not shrunk in place: each reason once, after the pods it holds back ("pods a, b: ..."), ""
// when none is refused.
func ShrinkRefused(s fsm.Snapshot) string {
	if s.ShapeHash == "" {
		return ""
	}
	var order []string
	pods := map[string][]string{}
	for _, p := range resizing(s) {
		if p.Resize.Asked.Equal(s.Size) || !shrinking(s, p) {
			continue
		}
		if why := shrinkRefusal(s, p); why != "" {
			if pods[why] == nil {
				order = append(order, why)
			}
			pods[why] = append(pods[why], p.Name)
		}
	}
	out := make([]string, len(order))
	for i, why := range order {
		noun := "pod"
		if len(pods[why]) > 1 {
			noun = "pods"
		}
		out[i] = fmt.Sprintf("%s %s: %s", noun, strings.Join(pods[why], ", "), why)
	}
	return strings.Join(out, "; ")
}

// wantedMaxmemory is the maxmemory the spec wants in bytes, 0 when it sets none (no limit).
func wantedMaxmemory(s fsm.Snapshot) int64 {
	v, ok := s.Settings["maxmemory"]
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(liveconf.Normalize("maxmemory", v), 10, 64)
	return n
}

// HoldsMaxmemory reports whether a change of maxmemory on p waits: its container has less
// memory than the spec asks for (in force, else as recorded). Such a node grows in place first,
// or is replaced by one of the new size; a raise applied to it now would let it fill past its
// limit and be OOM-killed.
func HoldsMaxmemory(s fsm.Snapshot, p fsm.Pod) bool {
	have := p.Size.MemoryBytes()
	if p.Resize != nil {
		have = p.Resize.InForce.MemoryBytes()
	}
	return have > 0 && s.Size.MemoryBytes() > have
}
