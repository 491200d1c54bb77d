package formation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

func TestFormation(t *testing.T) {
	harness.Create(t, harness.NewImage("e2e-image"), harness.NewConfig("e2e-config", "e2e-image"))
	cases := []struct {
		ns               string
		shards, replicas int32
	}{
		{"form-3x1", 3, 1},
		{"form-1x0", 1, 0},
		{"form-5x2", 5, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.shards, c.replicas), func(t *testing.T) {
			t.Parallel()
			harness.SetupNamespace(t, c.ns)
			vc := harness.NewCluster(c.ns, "vc", "e2e-config", harness.WithShards(c.shards), harness.WithReplicas(c.replicas))
			harness.Create(t, vc)
			got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
			if err != nil {
				t.Fatal(err)
			}
			harness.VerifyValkey(t, got, int(c.shards), int(c.replicas))
			verifyDNS(t, got)
			// Ready once every replica synced (verifyValkey waited for the links): reported
			// within a pass or two, not on the next 30 s tick.
			synced := time.Now()
			ready := harness.WaitReady(t, got, int(c.shards), int(c.replicas), nil, 10*time.Second)
			t.Logf("Ready %s after Valkey said every replica synced", ready.Sub(synced).Round(time.Millisecond))
			if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), got); err != nil {
				t.Fatal(err)
			}
			n := int(c.shards * (c.replicas + 1))
			if int(got.Status.ReadyNodes) != n || len(got.Status.NodeDetails) != n || got.Status.Shards != c.shards {
				t.Fatalf("status: ready %d, nodes %d, shards %d", got.Status.ReadyNodes, len(got.Status.NodeDetails), got.Status.Shards)
			}
			// Healthy: status.message is empty (users alert on it), every node ready, nothing lost.
			if got.Status.Message != "" {
				t.Errorf("status.message %q on a healthy cluster", got.Status.Message)
			}
			for _, nd := range got.Status.NodeDetails {
				if !nd.Ready || nd.NodeID == "" || nd.Role == "" {
					t.Errorf("status.nodeDetails: %+v", nd)
				}
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDataLost); c != nil {
				t.Errorf("DataLost on a new cluster: %+v", c)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("Degraded on a Ready cluster: %+v", c)
			}
			harness.WaitNodesActive(t, got, n, nil)
			out, err := harness.Kubectl(harness.Cluster, nil, "get", "valkeycluster", "-n", c.ns)
			if err != nil || !strings.Contains(string(out), "Active") || !strings.Contains(string(out), "STATE") {
				t.Fatalf("kubectl get valkeycluster: %v\n%s", err, out)
			}
		})
	}
}

func TestInvalidUntilConfigExists(t *testing.T) {
	ns := "late-config"
	harness.SetupNamespace(t, ns)
	vc := harness.NewCluster(ns, "vc", "late-config", harness.WithShards(1), harness.WithReplicas(1))
	harness.Create(t, vc)
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateInvalid, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The original's message, verbatim (operations/troubleshooting.md), in status.message and
	// in the log line of the transition.
	if got.Status.Message != `ValkeyConfig "late-config" not found` {
		t.Fatalf("status.message %q, want the original's message naming the missing config", got.Status.Message)
	}
	logged := slices.ContainsFunc(harness.ParseLog(t, harness.Op.Logs()), func(l harness.LogLine) bool {
		return l.Message() == "transitioning to Invalid" && strings.HasSuffix(l.Ref(), "."+ns) && l.Fields["reason"] == got.Status.Message
	})
	if !logged {
		t.Errorf("no `transitioning to Invalid` line with reason %q for %s", got.Status.Message, ns)
	}
	if pods := harness.Pods(t, vc); len(pods) != 0 {
		t.Fatalf("an Invalid cluster got %d pods", len(pods))
	}
	// The config first, its image later: still Invalid, now for the image.
	harness.Create(t, harness.NewConfig("late-config", "late-image"))
	harness.WaitStateMessage(t, vc, v1.StateInvalid, `ValkeyImage "late-image" not found`)
	harness.Create(t, harness.NewImage("late-image"))
	got, err = harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.VerifyValkey(t, got, 1, 1)
}

// TestOperatorRestartMidForming kills the operator while a cluster is Forming and starts a
// new one: the cluster still forms correctly, with the same pods (no second bootstrap) and
// every slot owned exactly once (verifyValkey).
func TestOperatorRestartMidForming(t *testing.T) {
	ns := "restart"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage("restart-image"), harness.NewConfig("restart-config", "restart-image"))
	vc := harness.NewCluster(ns, "vc", "restart-config", harness.WithShards(3), harness.WithReplicas(1))
	harness.Create(t, vc)
	// Poll tightly: formation takes seconds, and the kill must land inside it.
	deadline := time.Now().Add(harness.FormTimeout)
	for {
		var cur v1.ValkeyCluster
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err == nil && cur.Status.State == v1.StateForming {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster never reached Forming")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := harness.PodNames(t, vc)
	harness.Op.Kill(syscall.SIGKILL)
	// The operator is dead, so the state cannot move any more: if it is no longer Forming, the
	// kill came too late and this test would prove nothing about a restart mid-Forming.
	var died v1.ValkeyCluster
	if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &died); err != nil {
		t.Fatal(err)
	}
	if died.Status.State != v1.StateForming {
		t.Fatalf("the operator died with the cluster %s, not Forming: the restart was not mid-Forming", died.Status.State)
	}
	t.Logf("operator killed mid-Forming with %d pods (message %q)", len(before), died.Status.Message)
	var err error
	harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info")
	if err != nil {
		t.Fatal(err)
	}
	got, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.VerifyValkey(t, got, 3, 1)
	if after := harness.PodNames(t, vc); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("pods changed across the restart: %v -> %v", before, after)
	}
}

// TestDeleteRemovesEverything: owner references let the real garbage collector remove the
// ValkeyNodes and, through them, the pods and their ConfigMaps, and the Service and Secrets,
// once the ValkeyCluster is deleted. Each kind is checked to exist before the delete.
func TestDeleteRemovesEverything(t *testing.T) {
	ns := "delete"
	vc := harness.ActiveCluster(t, ns, 1, 0)
	count := func() map[string]int {
		left := map[string]int{}
		for kind, list := range map[string]client.ObjectList{"ValkeyNode": &v1.ValkeyNodeList{}, "Pod": &corev1.PodList{},
			"Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}} {
			if err := harness.K8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{v1.LabelCluster: "vc"}); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(list); n > 0 {
				left[kind] = n
			}
		}
		return left
	}
	if before := count(); len(before) != 5 {
		t.Fatalf("before the delete, the cluster's objects are %v: every kind should be there", before)
	}
	if err := harness.K8s.Delete(context.Background(), vc, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "every owned object gone after deleting the ValkeyCluster", 2*time.Minute, func() string {
		if left := count(); len(left) > 0 {
			return fmt.Sprintf("left: %v", left)
		}
		return ""
	})
}
