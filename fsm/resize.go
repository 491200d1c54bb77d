package fsm

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Size is a node's CPU and memory, each the container's request and limit (the operator sets
// both to one value): as quantities written ("" when not set).
type Size struct {
	CPU, Memory string
}

// MemoryBytes is Memory in bytes, 0 when not set or not a quantity.
func (z Size) MemoryBytes() int64 {
	q, err := resource.ParseQuantity(z.Memory)
	if err != nil {
		return 0
	}
	return q.Value()
}

// Equal compares two sizes as quantities ("1" and "1000m" are one CPU).
func (z Size) Equal(o Size) bool {
	return sameQuantity(z.CPU, o.CPU) && sameQuantity(z.Memory, o.Memory)
}

func sameQuantity(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	qa, erra := resource.ParseQuantity(a)
	qb, errb := resource.ParseQuantity(b)
	if erra != nil || errb != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
}

// SameQoS reports whether z and o set the same of CPU and memory: a pod resized from one to the
// other keeps its QoS class, which Kubernetes cannot change in place.
func (z Size) SameQoS(o Size) bool {
	return (z.CPU == "") == (o.CPU == "") && (z.Memory == "") == (o.Memory == "")
}

func (z Size) String() string {
	cpu, mem := z.CPU, z.Memory
	if cpu == "" {
		cpu = "none"
	}
	if mem == "" {
		mem = "none"
	}
	return "cpu " + cpu + ", memory " + mem
}

// Resize is what the pod and its kubelet say of the pod's size: what was asked of the kubelet
// (the pod's spec), what is in force (the container's status), and how an in-place resize goes
// (the pod's resize conditions, as a v1.35+ kubelet reports them).
type Resize struct {
	// Asked is the valkey container's requests and limits in the pod's spec; InForce are those
	// the kubelet reports applied (containerStatuses[].resources).
	Asked, InForce Size
	// Pending is the reason of the PodResizePending condition (Deferred, Infeasible), "" when
	// none; PendingMessage the kubelet's message, PendingSince when it was last set.
	Pending, PendingMessage string
	PendingSince            time.Time
	// Error is the message of a PodResizeInProgress condition with reason Error: the kubelet
	// could not apply the resize (a memory limit below what the container uses), and retries.
	Error string
	// DataLimit is the sizeLimit of the pod's data volume in bytes, 0 when it has none.
	DataLimit int64
	// Refused is why the API server refused the operator's resize of this pod to the snapshot's
	// size (controllers/resize.go remembers it), "" when it did not.
	Refused string
}

// Resize bounds and figures (plan/resize.go).
const (
	// ResizeDeferBound is how long a resize the kubelet defers (the node lacks room now) is
	// waited for before the node is replaced instead: the scheduler may find room elsewhere.
	ResizeDeferBound = 2 * time.Minute
	// ShrinkHeadroom: a node's memory shrinks in place only when what its process holds
	// (used_memory_rss) is at most this share of the new limit, room for a fork's copy-on-write,
	// replication buffers and clients.
	ShrinkHeadroom = 0.8
)

// InPlace says whether pod p, whose spec hash is not the snapshot's, can be brought to the
// snapshot's spec by an in-place resize instead of a replacement: ok when only its CPU and memory
// differ and the pod can take it. When only those differ but it cannot, why says so (for the
// log: the node is replaced, rolled as before). A pod of another shape gets false and "".
func (s Snapshot) InPlace(p Pod) (ok bool, why string) {
	if s.ShapeHash == "" || p.ShapeHash != s.ShapeHash || p.SpecHash == s.SpecHash {
		return false, ""
	}
	switch r := p.Resize; {
	case !p.Size.SameQoS(s.Size):
		return false, "a CPU or memory added or removed changes the pod's QoS class, which a resize cannot"
	case r == nil:
		return false, "its kubelet reports no container resources, so it cannot resize a running pod"
	case r.DataLimit > 0 && s.DataLimit > r.DataLimit:
		return false, fmt.Sprintf("its data volume, bounded at %s when the pod was created, is below the %s the new size needs", quantity(r.DataLimit), quantity(s.DataLimit))
	case r.Refused != "":
		return false, "the API server refused the resize: " + r.Refused
	case r.Pending == "Infeasible" && r.Asked.Equal(s.Size):
		return false, "the kubelet says the resize is infeasible: " + r.PendingMessage
	case r.Pending == "Deferred" && r.Asked.Equal(s.Size) && !r.PendingSince.IsZero() && s.Now.Sub(r.PendingSince) > ResizeDeferBound:
		return false, fmt.Sprintf("the kubelet has deferred the resize for more than %s: %s", ResizeDeferBound, r.PendingMessage)
	}
	return true, ""
}

func quantity(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// Replaced reports whether live pod p must be replaced to run the snapshot's spec: its spec hash
// is not the current one and it cannot be resized in place instead.
func (s Snapshot) Replaced(p Pod) bool {
	if s.SpecHash == "" || p.SpecHash == s.SpecHash {
		return false
	}
	ok, _ := s.InPlace(p)
	return !ok
}
