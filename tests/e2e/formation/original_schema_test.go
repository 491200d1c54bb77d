package formation

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// originalValkeyCluster is a ValkeyCluster as a client generated from the original's CRD sees
// it: the fields of reference/api/valkeycluster.md, with the original's types (status.nodes an
// array of strings, status.targetSpec the spec's shape), decoded with encoding/json as a
// generated client decodes (fields it does not know are ignored; a field of another type fails
// the whole object, as an array of objects in status.nodes did).
type originalValkeyCluster struct {
	Spec   originalSpec `json:"spec"`
	Status struct {
		State      string        `json:"state"`
		TargetSpec *originalSpec `json:"targetSpec"`
		Nodes      []string      `json:"nodes"`
		Message    string        `json:"message"`
	} `json:"status"`
}

type originalSpec struct {
	ConfigRef        string `json:"configRef"`
	Shards           int32  `json:"shards"`
	ReplicasPerShard int32  `json:"replicasPerShard"`
	ACL              []struct {
		Username       string   `json:"username"`
		PasswordHashes []string `json:"passwordHashes"`
		Permissions    []struct {
			RoleRef string `json:"roleRef"`
			Keys    []struct {
				Pattern string `json:"pattern"`
				Access  string `json:"access"`
			} `json:"keys"`
			Channels []string `json:"channels"`
		} `json:"permissions"`
	} `json:"acl"`
	Placement *struct {
		Zones        []string          `json:"zones"`
		ZoneSpread   string            `json:"zoneSpread"`
		NodeSelector map[string]string `json:"nodeSelector"`
	} `json:"placement"`
	TLS *struct {
		SecretRef string `json:"secretRef"`
	} `json:"tls"`
	PodAnnotations map[string]string `json:"podAnnotations"`
}

// readAsOriginal reads the cluster through the dynamic (unstructured) client and decodes it as
// the original's typed client would.
func readAsOriginal(t *testing.T, key client.ObjectKey) originalValkeyCluster {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("valkey.gomomento.com/v1alpha1")
	u.SetKind("ValkeyCluster")
	if err := harness.K8s.Get(context.Background(), key, u); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var vc originalValkeyCluster
	if err := json.Unmarshal(raw, &vc); err != nil {
		t.Fatalf("a client of the original's schema cannot decode the ValkeyCluster: %v", err)
	}
	return vc
}

// originalTooling checks, on the quickstart's formed 3×1 my-cluster, what a platform's existing
// tooling reads of the objects the operator creates, as the original's docs describe them: the
// Service's port names and selector (security/networking.md, reference/labels-annotations.md),
// the status through the original's schema (status.nodes the pods' names), the credential
// Secret's keys (security/index.md), and the docs' NetworkPolicy selecting the pods on their
// ports.
func originalTooling(t *testing.T, ns string, pods []corev1.Pod) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: "my-cluster"}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)

	t.Run("the Service's ports and selector", func(t *testing.T) {
		var svc corev1.Service
		if err := harness.K8s.Get(ctx, key, &svc); err != nil {
			t.Fatal(err)
		}
		ports := map[string]int32{}
		for _, p := range svc.Spec.Ports {
			ports[p.Name] = p.Port
		}
		if len(ports) != 2 || ports["valkey"] != 6379 || ports["valkey-bus"] != 16379 {
			t.Errorf("Service ports %v, the original's are valkey 6379 and valkey-bus 16379", ports)
		}
		if svc.Spec.Selector["app.kubernetes.io/instance"] != "my-cluster" {
			t.Errorf("Service selector %v does not select on app.kubernetes.io/instance", svc.Spec.Selector)
		}
		var selected corev1.PodList
		if err := harness.K8s.List(ctx, &selected, client.InNamespace(ns), client.MatchingLabels(svc.Spec.Selector)); err != nil {
			t.Fatal(err)
		}
		if len(selected.Items) != len(pods) {
			t.Errorf("the Service selects %d pods, the cluster runs %d", len(selected.Items), len(pods))
		}
		for _, p := range pods {
			var named []string
			for _, cp := range p.Spec.Containers[0].Ports {
				named = append(named, cp.Name)
			}
			if !slices.Equal(named, []string{"valkey", "valkey-bus"}) {
				t.Errorf("pod %s names its ports %v", p.Name, named)
			}
		}
	})

	t.Run("the status through the original's schema", func(t *testing.T) {
		vc := readAsOriginal(t, key)
		got := slices.Sorted(slices.Values(vc.Status.Nodes))
		if vc.Status.State != "Active" || !slices.Equal(got, names) || vc.Spec.Shards != 3 || vc.Status.TargetSpec != nil {
			t.Errorf("decoded state %q, nodes %v (pods %v), shards %d, targetSpec %+v", vc.Status.State, got, names, vc.Spec.Shards, vc.Status.TargetSpec)
		}
	})

	t.Run("the operator-auth Secret's keys", func(t *testing.T) {
		var s corev1.Secret
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-cluster-operator-auth"}, &s); err != nil {
			t.Fatal(err)
		}
		hex128 := regexp.MustCompile(`^[0-9a-f]{128}$`)
		var keys []string
		for k, v := range s.Data {
			keys = append(keys, k)
			if !hex128.Match(v) {
				t.Errorf("key %s holds %d characters, the original's 128 hex", k, len(v))
			}
		}
		if slices.Sort(keys); !slices.Equal(keys, []string{"operator-password", "repl-password"}) {
			t.Errorf("keys %v, the original's are operator-password and repl-password", keys)
		}
	})

	t.Run("the docs' NetworkPolicy", func(t *testing.T) {
		kubectl(t, docManifest(t, "networking-policy.yaml"), "apply", "-f", "-")
		var np networkingv1.NetworkPolicy
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "valkey-ingress"}, &np); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if !sel.Matches(labels.Set(p.Labels)) {
				t.Errorf("the docs' policy does not select pod %s (labels %v)", p.Name, p.Labels)
			}
		}
		declared := map[string]bool{}
		for _, c := range pods[0].Spec.Containers[0].Ports {
			declared[c.Name], declared[strconv.Itoa(int(c.ContainerPort))] = true, true
		}
		for _, rule := range np.Spec.Ingress {
			for _, port := range rule.Ports {
				if !declared[port.Port.String()] {
					t.Errorf("the policy admits port %s, which the pods do not declare", port.Port.String())
				}
			}
		}
		kubectl(t, nil, "-n", ns, "delete", "networkpolicy", "valkey-ingress")
	})
}

// waitTargetSpec waits until the cluster, still bootstrapping, shows the topology it works
// toward in status.targetSpec (through the original's schema), and returns it.
func waitTargetSpec(t *testing.T, key client.ObjectKey) originalSpec {
	t.Helper()
	var got originalSpec
	harness.WaitFor(t, "status.targetSpec while bootstrapping", harness.FormTimeout, func() string {
		vc := readAsOriginal(t, key)
		if vc.Status.TargetSpec != nil {
			got = *vc.Status.TargetSpec
			return ""
		}
		if vc.Status.State == "Active" {
			t.Fatalf("Active without ever showing a targetSpec")
		}
		return "state " + vc.Status.State + ", no targetSpec yet"
	})
	return got
}

// TestTopologyEditDuringBootstrapWaits: as the original documents (concepts/reconciliation.md,
// team-guide/scaling.md), a shards edit made while the cluster bootstraps waits: the bootstrap
// forms the 1×1 its status.targetSpec holds (two pods created before `cluster formed`), the
// snapshot is cleared once Active, and the edit is then carried out (a second shard joins and
// takes its slots), checked in Valkey itself.
func TestTopologyEditDuringBootstrapWaits(t *testing.T) {
	const ns = "deferred"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(1))
	harness.Create(t, vc)
	key := client.ObjectKeyFromObject(vc)
	if ts := waitTargetSpec(t, key); ts.Shards != 1 || ts.ReplicasPerShard != 1 || ts.ConfigRef != ns+"-config" {
		t.Fatalf("targetSpec %+v", ts)
	}
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 2 })
	if st := harness.CurrentCluster(t, vc).Status; st.FormedAt != nil {
		t.Fatalf("the cluster formed before the edit (state %s): the test shows nothing", st.State)
	}
	harness.WaitReady(t, vc, 2, 1, nil, harness.FormTimeout)
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 2, 1)
	if ts := readAsOriginal(t, key).Status.TargetSpec; ts != nil {
		t.Errorf("targetSpec %+v on a formed cluster", ts)
	}
	created, formed := 0, false
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Ref() != "ValkeyCluster.v1alpha1.valkey.gomomento.com/vc."+ns {
			continue
		}
		switch l.Message() {
		case logging.MsgCreatingPod:
			if !formed {
				created++
			}
		case logging.MsgClusterFormed:
			formed = true
		}
	}
	if !formed || created != 2 {
		t.Errorf("%d pods created before the cluster formed (formed: %t), want the 1×1 of targetSpec: 2", created, formed)
	}
}
