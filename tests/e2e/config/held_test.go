package config

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// heldKeys is how many keys of 100 bytes each cluster holds: a few MB, which a maxmemory of 4mb
// cannot hold (the cut: 100mb to 4mb left 752 and 755 of 20 000 keys).
const heldKeys = 20000

// TestEvictingChangesHeld: two teams' 1×1 clusters on one ValkeyConfig, each with heldKeys keys.
//   - maxmemory cut from 100mb to 4mb: both clusters hold it (LiveSettingsHeld, said once): every
//     node of both still runs 100mb and every key reads back, passes later and after the operator
//     was killed and started again;
//   - confirmed on the first cluster alone: its nodes run 4mb and it evicts (the cut is real);
//     the second still runs 100mb on every node with every key, passes later;
//   - confirmed on the ValkeyConfig: the second runs 4mb too;
//   - maxmemory removed from the ValkeyConfig: held on both, every node keeps 4mb, never 0;
//     confirmed as maxmemory=0, every node runs 0.
//
// Its pods also carry the data volume's sizeLimit derived from the config: two copies of a node
// grown in place to twice its 256Mi, and 64Mi (2 × 512Mi + 64Mi).
func TestEvictingChangesHeld(t *testing.T) {
	cfg := harness.NewConfig("held-config", "held-image")
	cfg.Spec.Valkey["maxmemory-policy"] = "allkeys-lru"
	harness.Create(t, harness.NewImage("held-image"), cfg)
	var vcs []*v1.ValkeyCluster
	for _, ns := range []string{"held-a", "held-b"} {
		harness.SetupNamespace(t, ns)
		vc := harness.NewCluster(ns, "vc", "held-config", harness.WithShards(1), harness.WithReplicas(1))
		harness.Create(t, vc)
		vcs = append(vcs, vc)
	}
	for i, vc := range vcs {
		got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
		if err != nil {
			t.Fatal(err)
		}
		harness.WaitReady(t, got, 1, 1, nil, harness.FormTimeout)
		harness.SeedKeys(t, got, heldKeys, harness.OpenUser)
		vcs[i] = got
	}
	a, b := vcs[0], vcs[1]
	checkDataSizeLimit(t, a, "1088Mi")
	const (
		mb100 = "104857600"
		mb4   = "4194304"
	)
	logStart := len(harness.ParseLog(t, harness.Op.Logs()))

	// The cut: held on both.
	harness.EditConfig(t, "held-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["maxmemory"] = "4mb" })
	for _, vc := range vcs {
		waitHeld(t, vc, "maxmemory from 100mb to 4mb", v1.AnnotationConfirmLiveSettings+"=maxmemory=4mb")
	}
	// One more full pass of each: the operator looked again and still holds.
	lookAgain(t, a, b)
	for _, vc := range vcs {
		checkRunning(t, vc, "maxmemory", mb100)
		harness.CheckSeeded(t, vc, heldKeys, harness.OpenUser)
	}
	for _, vc := range vcs {
		if n := harness.CountLines(t, logging.MsgSettingsHeld, vc.Namespace, ""); n != 1 {
			t.Errorf("%s: %q said %d times, want once", vc.Namespace, logging.MsgSettingsHeld, n)
		}
	}

	for _, vc := range vcs {
		checkHeldEvent(t, vc, "maxmemory from 100mb to 4mb")
	}

	// An operator killed and started again decides the same: nothing of the hold is in its memory.
	harness.RestartOperator(t)
	lookAgain(t, a, b)
	for _, vc := range vcs {
		checkRunning(t, vc, "maxmemory", mb100)
		waitHeld(t, vc, "maxmemory from 100mb to 4mb")
	}

	// Confirmed on the first cluster: it alone takes the cut.
	harness.EditCluster(t, a, func(c *v1.ValkeyCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1.AnnotationConfirmLiveSettings] = "maxmemory=4mb"
	})
	start := time.Now()
	harness.WaitLiveSettings(t, a, map[string]string{"maxmemory": mb4}, harness.LiveTimeout)
	t.Logf("%s/vc runs 4mb %s after its confirmation", a.Namespace, time.Since(start).Round(time.Millisecond))
	waitNotHeld(t, a)
	harness.WaitFor(t, a.Namespace+" evicts down to 4mb", harness.LiveTimeout, func() string {
		if n := primaryKeys(t, a); n >= heldKeys {
			return fmt.Sprintf("%d keys", n)
		}
		return ""
	})
	lookAgain(t, b)
	checkRunning(t, b, "maxmemory", mb100)
	harness.CheckSeeded(t, b, heldKeys, harness.OpenUser)
	waitHeld(t, b, "maxmemory from 100mb to 4mb")
	t.Logf("after the first cluster's confirmation: %s holds %d keys, %s all %d", a.Namespace, primaryKeys(t, a), b.Namespace, heldKeys)

	// Confirmed on the ValkeyConfig: the rest.
	harness.EditConfig(t, "held-config", func(c *v1.ValkeyConfig) {
		c.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=4mb"}
	})
	harness.WaitLiveSettings(t, b, map[string]string{"maxmemory": mb4}, harness.LiveTimeout)
	waitNotHeld(t, b)

	// Removed: held, the nodes keep 4mb and never run 0 until it is confirmed.
	harness.EditConfig(t, "held-config", func(c *v1.ValkeyConfig) { delete(c.Spec.Valkey, "maxmemory") })
	for _, vc := range vcs {
		waitHeld(t, vc, "maxmemory 4mb removed", v1.AnnotationConfirmLiveSettings+"=maxmemory=0")
	}
	lookAgain(t, a, b)
	for _, vc := range vcs {
		checkRunning(t, vc, "maxmemory", mb4)
	}
	harness.EditConfig(t, "held-config", func(c *v1.ValkeyConfig) {
		c.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=0"}
	})
	for _, vc := range vcs {
		harness.WaitLiveSettings(t, vc, map[string]string{"maxmemory": "0"}, harness.LiveTimeout)
		waitNotHeld(t, vc)
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		if strings.Contains(l.Ref(), "/vc.held-") && l.Message() == logging.MsgSettingsHeld {
			t.Logf("%s: %s", l.Ref(), l.Raw)
		}
	}
}

// lookAgain makes the operator run one more full pass over each of vcs, and waits for it: a
// Ready cluster's next full pass is otherwise its 30 s tick, and an annotation change is a watch
// event (one of no meaning to the operator).
func lookAgain(t *testing.T, vcs ...*v1.ValkeyCluster) {
	t.Helper()
	var marks []func(int)
	for _, vc := range vcs {
		marks = append(marks, harness.PassMark(t, vc))
		harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations["example.com/looked-at"] = time.Now().UTC().Format(time.RFC3339Nano)
		})
	}
	for _, passed := range marks {
		passed(1)
	}
}

// waitHeld waits until vc's LiveSettingsHeld condition is True and says each of want, while the
// cluster stays Ready with an empty status.message.
func waitHeld(t *testing.T, vc *v1.ValkeyCluster, want ...string) {
	t.Helper()
	harness.WaitFor(t, vc.Namespace+" holds the change", harness.LiveTimeout, func() string {
		cur := harness.CurrentCluster(t, vc)
		c := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionLiveSettingsHeld)
		if c == nil || c.Status != "True" {
			return fmt.Sprintf("LiveSettingsHeld %+v", c)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return fmt.Sprintf("LiveSettingsHeld says %q, not %q", c.Message, w)
			}
		}
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) || cur.Status.Message != "" {
			return fmt.Sprintf("not Ready while holding: %q", cur.Status.Message)
		}
		return ""
	})
}

// waitNotHeld waits until vc has no LiveSettingsHeld condition.
func waitNotHeld(t *testing.T, vc *v1.ValkeyCluster) {
	t.Helper()
	harness.WaitFor(t, vc.Namespace+" holds nothing", harness.LiveTimeout, func() string {
		if c := meta.FindStatusCondition(harness.CurrentCluster(t, vc).Status.Conditions, v1.ConditionLiveSettingsHeld); c != nil {
			return fmt.Sprintf("LiveSettingsHeld %+v", c)
		}
		return ""
	})
}

// checkHeldEvent checks that vc has a Normal Event LiveSettingsHeld saying want.
func checkHeldEvent(t *testing.T, vc *v1.ValkeyCluster, want string) {
	t.Helper()
	harness.WaitFor(t, vc.Namespace+": a LiveSettingsHeld Event", harness.LiveTimeout, func() string {
		var evs eventsv1.EventList
		if err := harness.K8s.List(context.Background(), &evs, client.InNamespace(vc.Namespace)); err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ValkeyCluster" && e.Regarding.Name == vc.Name && e.Reason == "LiveSettingsHeld" &&
				e.Type == corev1.EventTypeNormal && strings.Contains(e.Note, want) {
				return ""
			}
		}
		return fmt.Sprintf("%d Events, none LiveSettingsHeld saying %q", len(evs.Items), want)
	})
}

// checkRunning checks that every node of vc answers CONFIG GET key with want.
func checkRunning(t *testing.T, vc *v1.ValkeyCluster, key, want string) {
	t.Helper()
	for _, p := range harness.Pods(t, vc) {
		if got := harness.ConfigGet(t, p, key); got != want {
			t.Errorf("%s/%s runs %s %s, want %s", vc.Namespace, p.Name, key, got, want)
		}
	}
}

// primaryKeys is the DBSIZE of vc's primary (its one shard).
func primaryKeys(t *testing.T, vc *v1.ValkeyCluster) int64 {
	t.Helper()
	pod := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	for _, p := range harness.Pods(t, vc) {
		if p.Name != pod {
			continue
		}
		c := harness.DefaultUserClient(t, p)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatalf("%s: DBSIZE: %v", p.Name, err)
		}
		return n
	}
	t.Fatalf("%s: primary pod %q not found", vc.Namespace, pod)
	return 0
}

// checkDataSizeLimit checks that every pod of vc bounds its data emptyDir at want.
func checkDataSizeLimit(t *testing.T, vc *v1.ValkeyCluster, want string) {
	t.Helper()
	for _, p := range harness.Pods(t, vc) {
		var data *corev1.EmptyDirVolumeSource
		for _, v := range p.Spec.Volumes {
			if v.Name == "data" {
				data = v.EmptyDir
			}
		}
		if data == nil || data.SizeLimit == nil || data.SizeLimit.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s: data volume %+v, want an emptyDir of sizeLimit %s", p.Name, data, want)
		}
	}
}
