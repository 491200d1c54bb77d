package config

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// TestResizeInPlace: a 3×1 on 8.0.1 under the 16-slot writer has its ValkeyConfig's memory
// doubled (256Mi → 512Mi) with maxmemory (150mb → 300mb). Every pod is resized in place: the
// kubelet reports 512Mi in force (the limit in the container's cgroup), every node runs maxmemory
// 300mb, the ValkeyNodes record 512Mi; no pod is replaced (same UIDs), no shard fails over, no
// replica resyncs (sync_full unchanged on every node), no write is refused and every
// acknowledged key reads back. Then a shrink to 128Mi while maxmemory stays 300mb is refused
// (ResizeRefused says why, no pod changes, nothing is OOM-killed); with maxmemory 90mb
// (confirmed: a lower maxmemory is held until it is) it goes through, maxmemory first, every pod
// shrunk in place.
func TestResizeInPlace(t *testing.T) {
	vc := sizedCluster(t, "resize", "8.0.1", 1)
	checkGrow(t, vc)
	checkShrink(t, vc)
}

// TestResizeInPlaceValkey9 is TestResizeInPlace's grow on Valkey 9.1.2; then a CPU change
// (500m → 1) with the operator SIGKILLed three times from its first `resizing pod in place`
// line: every pod ends at 1 CPU in place, none replaced.
func TestResizeInPlaceValkey9(t *testing.T) {
	vc := sizedCluster(t, "resize-9", localcluster.Valkey9Version, 1)
	checkGrow(t, vc)
	checkKilledMidResize(t, vc)
}

// checkKilledMidResize is TestResizeInPlaceValkey9's CPU change under operator kills.
func checkKilledMidResize(t *testing.T, vc *v1.ValkeyCluster) {
	ns := vc.Namespace
	uids := harness.PodUIDs(t, vc)
	before := harness.CountLines(t, logging.MsgResizingPod, ns, "")
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.CPU = ptr.To(resource.MustParse("1")) })
	harness.WaitLine(t, logging.MsgResizingPod, ns, before, time.Minute)
	for range 3 {
		harness.RestartOperator(t)
		time.Sleep(300 * time.Millisecond)
	}
	harness.WaitFor(t, "every pod at 1 CPU", 2*time.Minute, func() string {
		for _, p := range harness.Pods(t, vc) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Resources == nil || cs.Resources.Limits.Cpu().String() != "1" {
					return fmt.Sprintf("%s runs %v", p.Name, cs.Resources)
				}
			}
		}
		return ""
	})
	harness.WaitFor(t, "every ValkeyNode recording 1 CPU", time.Minute, func() string {
		var list v1.ValkeyNodeList
		if err := harness.K8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, n := range list.Items {
			if n.Spec.CPU != "1" {
				return fmt.Sprintf("%s records %s", n.Name, n.Spec.CPU)
			}
		}
		return ""
	})
	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a resize the operator was killed in: before %v, after %v", uids, after)
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if strings.HasSuffix(l.Ref(), "."+ns) && (l.Message() == logging.MsgRetiringNode || l.Message() == logging.MsgResizeNotInPlace || harness.FailoverLine(l.Message())) {
			t.Errorf("after the kills: %s", l.Raw)
		}
	}
}

// TestResizeInPlace3x2 is TestResizeInPlace's grow on a 3×2 on Valkey 9.1.2.
func TestResizeInPlace3x2(t *testing.T) {
	vc := sizedCluster(t, "resize-3x2", localcluster.Valkey9Version, 2)
	checkGrow(t, vc)
}

// sizedCluster is a Ready 3×replicas of version at 500m/256Mi with maxmemory 150mb.
func sizedCluster(t *testing.T, ns, version string, replicas int32) *v1.ValkeyCluster {
	t.Helper()
	harness.SetupNamespace(t, ns)
	img := harness.NewImage(ns + "-image")
	img.Spec.Tag, img.Spec.Version = version, version
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	cfg.Spec.Valkey["maxmemory"] = "150mb"
	harness.Create(t, img, cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(3), harness.WithReplicas(replicas))
	harness.Create(t, vc)
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, got, 3, int(replicas), nil, harness.FormTimeout)
	harness.WaitPrimariesSpread(t, got) // no spread failover in the middle of the resize
	return got
}

// checkGrow is TestResizeInPlace's grow.
func checkGrow(t *testing.T, vc *v1.ValkeyCluster) {
	ns := vc.Namespace
	uids := harness.PodUIDs(t, vc)
	syncs := harness.StatsSum(t, vc, "sync_full")
	w, opts := harness.StartClusterWriter(t, vc)
	time.Sleep(2 * time.Second)
	// The primaries as the status says them once Ready again: a spread failover that
	// WaitPrimariesSpread waited for may not be in the status yet when it returns.
	harness.WaitReady(t, vc, 3, int(vc.Spec.ReplicasPerShard), nil, harness.FormTimeout)
	primaries := primaryPods(t, vc)

	logStart := len(harness.ParseLog(t, harness.Op.Logs()))
	start := time.Now()
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) {
		c.Spec.Resources.Memory = ptr.To(resource.MustParse("512Mi"))
		c.Spec.Valkey["maxmemory"] = "300mb"
	})
	waitInForce(t, vc, "512Mi")
	inForce := time.Since(start)
	harness.WaitLiveSettings(t, vc, map[string]string{"maxmemory": "314572800"}, harness.LiveTimeout)
	waitNodesRecord(t, vc, "512Mi")
	t.Logf("every pod runs 512Mi %s after the change, maxmemory 300mb and the record %s after it",
		inForce.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	time.Sleep(2 * time.Second)

	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a resize: before %v, after %v", uids, after)
	}
	if after := primaryPods(t, vc); strings.Join(after, ",") != strings.Join(primaries, ",") {
		t.Errorf("primaries changed: before %v, after %v", primaries, after)
	}
	if after := harness.StatsSum(t, vc, "sync_full"); after != syncs {
		t.Errorf("full syncs %d before the resize, %d after: a resize resyncs no replica", syncs, after)
	}
	resizing, resized := 0, 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		switch {
		case !strings.HasSuffix(l.Ref(), "."+ns):
		case harness.FailoverLine(l.Message()) || l.Message() == logging.MsgRetiringNode || l.Message() == logging.MsgCreatingPod:
			t.Errorf("a resize logged %q", l.Message())
		case l.Message() == logging.MsgResizingPod && l.Fields[logging.FieldMemory] == "512Mi":
			resizing++
		case l.Message() == logging.MsgPodResized && l.Fields[logging.FieldMemory] == "512Mi":
			resized++
		}
	}
	if nodes := 3 * (1 + int(vc.Spec.ReplicasPerShard)); resizing != nodes || resized != nodes {
		t.Errorf("%d %q and %d %q lines, want one of each per node (%d)", resizing, logging.MsgResizingPod, resized, logging.MsgPodResized, nodes)
	}
	waitResizedEvents(t, vc, harness.PodNames(t, vc))
	r := harness.FinishWriter(t, w, vc, opts)
	refused := 0
	for _, s := range r.Slots {
		refused += s.Failures
	}
	if refused > 0 || r.LostUnreplicated > 0 || r.LostReplicated > 0 {
		t.Errorf("%d writes refused, %d+%d acknowledged keys lost during an in-place resize: want 0\n%s", refused, r.LostReplicated, r.LostUnreplicated, r)
	}
}

// checkShrink is TestResizeInPlace's shrink: refused while maxmemory does not fit, then done.
func checkShrink(t *testing.T, vc *v1.ValkeyCluster) {
	ns := vc.Namespace
	uids := harness.PodUIDs(t, vc)
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("128Mi")) })
	harness.WaitFor(t, "ResizeRefused", time.Minute, func() string {
		c := meta.FindStatusCondition(harness.CurrentCluster(t, vc).Status.Conditions, v1.ConditionResizeRefused)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "maxmemory 300mb does not fit") && strings.HasPrefix(c.Message, "pods ") {
			return fmt.Sprintf("condition %+v", c)
		}
		t.Logf("ResizeRefused: %s", c.Message)
		return ""
	})
	time.Sleep(5 * time.Second) // and nothing changes meanwhile
	for _, p := range harness.Pods(t, vc) {
		if got := harness.MemoryInForce(p); got != "512Mi" {
			t.Errorf("%s: %s in force while its shrink is refused", p.Name, got)
		}
		checkNotOOMKilled(t, p)
	}
	start := time.Now()
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) {
		// A lower maxmemory evicts or refuses writes: held until confirmed (TestEvictingChangesHeld).
		c.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=90mb"}
		c.Spec.Valkey["maxmemory"] = "90mb"
	})
	waitInForce(t, vc, "128Mi")
	waitNodesRecord(t, vc, "128Mi")
	t.Logf("shrunk in place %s after maxmemory was lowered", time.Since(start).Round(time.Millisecond))
	harness.WaitLiveSettings(t, vc, map[string]string{"maxmemory": "94371840"}, harness.LiveTimeout)
	harness.WaitFor(t, "ResizeRefused gone", time.Minute, func() string {
		if c := meta.FindStatusCondition(harness.CurrentCluster(t, vc).Status.Conditions, v1.ConditionResizeRefused); c != nil {
			return fmt.Sprintf("condition %+v", c)
		}
		return ""
	})
	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a shrink: before %v, after %v", uids, after)
	}
	for _, p := range harness.Pods(t, vc) {
		checkNotOOMKilled(t, p)
	}
}

// waitInForce waits until every pod of vc asks for and runs memory (its kubelet says so, and no
// resize is pending or in progress).
func waitInForce(t *testing.T, vc *v1.ValkeyCluster, memory string) {
	t.Helper()
	harness.WaitFor(t, "every pod at "+memory, 2*time.Minute, func() string {
		for _, p := range harness.Pods(t, vc) {
			if got := harness.MemoryInForce(p); got != memory {
				return fmt.Sprintf("%s runs %s", p.Name, got)
			}
			if asked := p.Spec.Containers[0].Resources.Limits.Memory().String(); asked != memory {
				return fmt.Sprintf("%s asks for %s", p.Name, asked)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
					return fmt.Sprintf("%s: %s %s %s", p.Name, c.Type, c.Reason, c.Message)
				}
			}
		}
		return ""
	})
}

// waitNodesRecord waits until every ValkeyNode of vc records memory.
func waitNodesRecord(t *testing.T, vc *v1.ValkeyCluster, memory string) {
	t.Helper()
	harness.WaitFor(t, "every ValkeyNode recording "+memory, time.Minute, func() string {
		var list v1.ValkeyNodeList
		if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace)); err != nil {
			return err.Error()
		}
		for _, n := range list.Items {
			if n.Spec.Memory != memory {
				return fmt.Sprintf("%s records %s", n.Name, n.Spec.Memory)
			}
		}
		return ""
	})
}

// checkNotOOMKilled fails when p's container was OOM-killed or the pod failed.
func checkNotOOMKilled(t *testing.T, p corev1.Pod) {
	t.Helper()
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("%s: phase %s", p.Name, p.Status.Phase)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil {
			t.Errorf("%s: terminated: %s, exit code %d", p.Name, term.Reason, term.ExitCode)
		}
	}
}

// waitResizedEvents waits for a Resized Event on vc for each of pods, related to that pod (each
// its own Event, not a series).
func waitResizedEvents(t *testing.T, vc *v1.ValkeyCluster, pods []string) {
	t.Helper()
	harness.WaitFor(t, "a Resized Event per pod", harness.LiveTimeout, func() string {
		var evs eventsv1.EventList
		if err := harness.K8s.List(context.Background(), &evs, client.InNamespace(vc.Namespace)); err != nil {
			return err.Error()
		}
		missing := []string{}
		for _, pod := range pods {
			found := false
			for _, e := range evs.Items {
				if e.Regarding.Kind == "ValkeyCluster" && e.Regarding.Name == vc.Name && e.Reason == "Resized" &&
					e.Type == corev1.EventTypeNormal && strings.HasPrefix(e.Note, "pod "+pod+":") && e.Related != nil && e.Related.Kind == "Pod" && e.Related.Name == pod {
					found = true
				}
			}
			if !found {
				missing = append(missing, pod)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("none for %v", missing)
		}
		return ""
	})
}

// TestResizeMakesRoom: the local cluster enforces limits, so a resize is real room. 400 MiB
// written into a 1×0 node at 256Mi (maxmemory 0: nothing in Valkey stops it) gets its
// valkey-server OOM-killed by the kernel, and its pod says OOMKilled; the same load into a 1×0
// grown in place to 512Mi first is held: same pod, no process killed, every key there. A shrink
// back to 256Mi is then refused (ResizeRefused: what the node holds), and nothing is killed.
func TestResizeMakesRoom(t *testing.T) {
	const load = 400 // MiB, in 1 MiB values
	small := roomCluster(t, "room-small")
	victim := harness.Pods(t, small)[0]
	if n, err := loadMiB(victim, load); err == nil {
		t.Fatalf("%d MiB written into a node limited to 256Mi, and no OOM kill", n)
	} else {
		t.Logf("the load stopped after %d MiB: %v", n, err)
	}
	harness.WaitFor(t, victim.Name+" OOM-killed", time.Minute, func() string {
		var p corev1.Pod
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(&victim), &p); err != nil {
			return err.Error()
		}
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.Reason == "OOMKilled" {
				return ""
			}
		}
		return fmt.Sprintf("phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})

	big := roomCluster(t, "room-big")
	uids := harness.PodUIDs(t, big)
	harness.EditConfig(t, big.Namespace+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("512Mi")) })
	waitInForce(t, big, "512Mi")
	p := harness.Pods(t, big)[0]
	if n, err := loadMiB(p, load); err != nil {
		t.Fatalf("after the resize to 512Mi the load stopped after %d MiB: %v", n, err)
	}
	c := harness.DefaultUserClient(t, p)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != load {
		t.Fatalf("DBSIZE %d (%v), want %d", n, err, load)
	}

	// Back to 256Mi while the node holds 400 MiB: refused, said, nothing killed or replaced.
	harness.EditConfig(t, big.Namespace+"-config", func(c *v1.ValkeyConfig) { c.Spec.Resources.Memory = ptr.To(resource.MustParse("256Mi")) })
	harness.WaitFor(t, "ResizeRefused for what the node holds", time.Minute, func() string {
		c := meta.FindStatusCondition(harness.CurrentCluster(t, big).Status.Conditions, v1.ConditionResizeRefused)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "pod "+p.Name+": shrinking memory to 256Mi refused: its shard's nodes hold") {
			return fmt.Sprintf("condition %+v", c)
		}
		t.Logf("ResizeRefused: %s", c.Message)
		return ""
	})
	time.Sleep(5 * time.Second)
	if got := harness.MemoryInForce(harness.Pods(t, big)[0]); got != "512Mi" {
		t.Errorf("%s in force after a refused shrink", got)
	}
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != load {
		t.Errorf("DBSIZE %d (%v) after a refused shrink, want %d", n, err, load)
	}
	if !harness.Logged(t, logging.MsgShrinkRefused, big.Namespace) {
		t.Errorf("no %q line", logging.MsgShrinkRefused)
	}
	if after := harness.PodUIDs(t, big); !maps.Equal(uids, after) {
		t.Errorf("pods replaced: before %v, after %v", uids, after)
	}
	for _, p := range harness.Pods(t, big) {
		checkNotOOMKilled(t, p)
	}
}

// roomCluster is a Ready 1×0 at 500m/256Mi with maxmemory 0 (no limit).
func roomCluster(t *testing.T, ns string) *v1.ValkeyCluster {
	t.Helper()
	harness.SetupNamespace(t, ns)
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	cfg.Spec.Valkey["maxmemory"] = "0"
	harness.Create(t, harness.NewImage(ns+"-image"), cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(0))
	harness.Create(t, vc)
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, got, 1, 0, nil, harness.FormTimeout)
	return got
}

// loadMiB writes n values of 1 MiB into p's node (which serves every slot), one at a time; it
// returns how many were acknowledged and the first error.
func loadMiB(p corev1.Pod, n int) (int, error) {
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(p)}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	value := strings.Repeat("x", 1<<20)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Do(ctx, c.B().Set().Key(fmt.Sprintf("room:%d", i)).Value(value).Build()).Error()
		cancel()
		if err != nil {
			return i, err
		}
	}
	return n, nil
}
