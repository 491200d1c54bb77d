package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestForeignObjectsAreNeitherChangedNorTrusted: an object already in the namespace under a name
// the operator needs for a new cluster, that the cluster does not control (an application's
// Secret, one planted to choose the operator's password, a Service, a PodDisruptionBudget), makes
// the cluster Invalid with a message naming it; nothing of it changes (its resourceVersion
// stays), no node is created, and once it is deleted the cluster goes on to Ready by itself.
// Before: the operator overwrote a Secret {cluster}-acl with its ACL file, and adopted a planted
// {cluster}-operator-auth as its credential.
func TestForeignObjectsAreNeitherChangedNorTrusted(t *testing.T) {
	const ns = "tenant-foreign"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	cases := []struct {
		cluster string
		obj     client.Object
		kind    string
	}{
		{"app", &corev1.Secret{ObjectMeta: meta("app-acl"), StringData: map[string]string{"database-url": "postgres://app"}}, "Secret"},
		{"planted", &corev1.Secret{ObjectMeta: meta("planted-operator-auth"), StringData: map[string]string{"password": "chosen-by-someone", "repl-password": "chosen-too"}}, "Secret"},
		{"svc", &corev1.Service{ObjectMeta: meta("svc"), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, "Service"},
		{"pdb", &policyv1.PodDisruptionBudget{ObjectMeta: meta("pdb-shard-0"), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}}, "PodDisruptionBudget"},
	}
	for _, c := range cases {
		harness.Create(t, c.obj)
	}
	versions := map[string]string{}
	for _, c := range cases {
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(c.obj), c.obj); err != nil {
			t.Fatal(err)
		}
		versions[c.obj.GetName()] = c.obj.GetResourceVersion()
	}
	clusters := map[string]*v1.ValkeyCluster{}
	for _, c := range cases {
		clusters[c.cluster] = harness.NewCluster(ns, c.cluster, ns+"-config", harness.WithShards(1), harness.WithReplicas(0))
		harness.Create(t, clusters[c.cluster])
	}
	for _, c := range cases {
		want := c.kind + " " + c.obj.GetName() + " is not controlled by ValkeyCluster " + c.cluster
		waitInvalidSaying(t, clusters[c.cluster], want)
	}
	// The PodDisruptionBudget is met only once the pod exists (the budgets are kept after the
	// pass's status): that cluster may have a node; the others have none.
	for _, c := range cases[:3] {
		if n := len(nodeNamesOf(t, clusters[c.cluster])); n != 0 {
			t.Errorf("%s: %d ValkeyNodes created beside a foreign %s", c.cluster, n, c.kind)
		}
	}
	// Passes keep running meanwhile (they requeue on the tick or a watch); each cluster's pass
	// mark proves the operator looked at it again before the objects are checked.
	var passed []func(int)
	for _, vc := range clusters {
		passed = append(passed, harness.PassMark(t, vc))
	}
	time.Sleep(2 * time.Second)
	for _, p := range passed {
		p(1)
	}
	for _, c := range cases {
		got := c.obj.DeepCopyObject().(client.Object)
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(c.obj), got); err != nil {
			t.Fatal(err)
		}
		if got.GetResourceVersion() != versions[c.obj.GetName()] {
			t.Errorf("%s %s was changed by the operator", c.kind, c.obj.GetName())
		}
		if len(got.GetOwnerReferences()) != 0 {
			t.Errorf("%s %s was adopted: %v", c.kind, c.obj.GetName(), got.GetOwnerReferences())
		}
	}
	// Cleared up, each cluster goes on by itself.
	for _, c := range cases {
		if err := harness.K8s.Delete(context.Background(), c.obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		harness.WaitReady(t, clusters[c.cluster], 1, 0, nil, harness.FormTimeout)
	}
	var cred corev1.Secret
	if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "planted-operator-auth"}, &cred); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&cred, clusters["planted"]) || string(cred.Data["operator-password"]) == "chosen-by-someone" || string(cred.Data["password"]) == "chosen-by-someone" {
		t.Error("the operator's credential is not its own")
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if strings.HasSuffix(l.Ref(), "."+ns) && (strings.Contains(l.Raw, "chosen-by-someone") || strings.Contains(l.Raw, "postgres://app")) {
			t.Errorf("a foreign Secret's data in the log: %s", l.Raw)
		}
	}
}

// TestRefusedPodsBackOff: a ResourceQuota that allows no pod refuses every pod of a 1×1. The
// operator creates no pile of records (at most one node's ValkeyNode and ConfigMap at a time,
// deleted in the pass that was refused), retries with a back-off (1 s doubling: a handful of WARN
// lines, not one per pass), and says why in status.message (the pod and the API server's
// reason). Raising the quota heals the cluster. Before: 232 ValkeyNodes and 234 ConfigMaps in
// 20 s for a one-node cluster, 250 WARN lines, and status said only `waiting for pods`.
func TestRefusedPodsBackOff(t *testing.T) {
	const ns = "tenant-quota"
	harness.SetupNamespace(t, ns)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	harness.Create(t, quota, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(1))
	before := harness.CountLines(t, logging.MsgReconcileError, ns, "")
	harness.Create(t, vc)
	start := time.Now()
	harness.WaitFor(t, "the quota's refusal in status.message", time.Minute, func() string {
		cur := harness.CurrentCluster(t, vc)
		if strings.Contains(cur.Status.Message, "could not be created") && strings.Contains(cur.Status.Message, "exceeded quota") {
			t.Logf("status.message: %s", cur.Status.Message)
			return ""
		}
		return fmt.Sprintf("status.message %q", cur.Status.Message)
	})
	most := 0
	for time.Since(start) < 25*time.Second {
		most = max(most, len(nodeNamesOf(t, vc)), countConfigMaps(t, ns))
		time.Sleep(100 * time.Millisecond)
	}
	warns := harness.CountLines(t, logging.MsgReconcileError, ns, "") - before
	t.Logf("over 25 s: at most %d ValkeyNodes or ConfigMaps at once, %d WARN lines", most, warns)
	if most > 2 {
		t.Errorf("%d ValkeyNodes or ConfigMaps at once for a refused 1x1", most)
	}
	// 1+2+4+8+16 s: five or six tries in 25 s, a pod each at most.
	if warns == 0 || warns > 12 {
		t.Errorf("%d %q lines in 25 s", warns, logging.MsgReconcileError)
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgReconcileError && strings.HasSuffix(l.Ref(), "."+ns) && !strings.Contains(l.Raw, "exceeded quota") {
			t.Errorf("a WARN line without the API server's reason: %s", l.Raw)
		}
	}
	raised := quota.DeepCopy()
	raised.Spec.Hard[corev1.ResourcePods] = resource.MustParse("10")
	if err := harness.K8s.Patch(context.Background(), raised, client.MergeFrom(quota)); err != nil {
		t.Fatal(err)
	}
	raisedAt := time.Now()
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	t.Logf("Ready %s after the quota was raised (the back-off had reached up to 32 s)", time.Since(raisedAt).Round(100*time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 1, 1)
}

// waitInvalidSaying waits until vc is Invalid with a status.message that contains want.
func waitInvalidSaying(t *testing.T, vc *v1.ValkeyCluster, want string) {
	t.Helper()
	harness.WaitFor(t, fmt.Sprintf("%s Invalid saying %q", vc.Name, want), time.Minute, func() string {
		cur := harness.CurrentCluster(t, vc)
		if cur.Status.State == v1.StateInvalid && strings.Contains(cur.Status.Message, want) {
			return ""
		}
		return fmt.Sprintf("state %s message %q", cur.Status.State, cur.Status.Message)
	})
}

// nodeNamesOf lists the ValkeyNodes vc controls.
func nodeNamesOf(t *testing.T, vc *v1.ValkeyCluster) []string {
	t.Helper()
	var list v1.ValkeyNodeList
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(vc.Namespace), client.MatchingLabels{v1.LabelCluster: vc.Name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out
}

// countConfigMaps counts the ConfigMaps of ns but the API server's own (kube-root-ca.crt).
func countConfigMaps(t *testing.T, ns string) int {
	t.Helper()
	var list corev1.ConfigMapList
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range list.Items {
		if c.Name != "kube-root-ca.crt" {
			n++
		}
	}
	return n
}

func ptrTo[T any](v T) *T { return &v }

// impostorServer answers every connection with an array header no client can allocate (what
// crashed the operator in the break test) and logs who connected.
const impostorServer = `import socket, sys, threading
def handle(c, addr):
    data = c.recv(65536)
    sys.stdout.write("connection from %s: %r\n" % (addr, data[:40])); sys.stdout.flush()
    c.sendall(b"*4611686018427387904\r\n")
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 6379)); s.listen(100)
while True:
    c, a = s.accept(); threading.Thread(target=handle, args=(c, a), daemon=True).start()
`

// TestImpostorPodIsNoNode: a pod a team creates with the cluster's labels and a controller owner
// reference to one of the cluster's real ValkeyNodes (its name and UID are readable by every
// team) is not that node's pod: the operator never connects to it (so never sends it its
// password) and goes on managing the cluster. Before: it observed the pod as a node, sent it
// HELLO with its credentials, and the impostor's reply crashed the operator, again and again.
func TestImpostorPodIsNoNode(t *testing.T) {
	const ns = "tenant-impostor"
	vc := harness.ActiveCluster(t, ns, 1, 0)
	harness.WaitReady(t, vc, 1, 0, nil, harness.FormTimeout)
	var nodes v1.ValkeyNodeList
	if err := harness.K8s.List(context.Background(), &nodes, client.InNamespace(ns)); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("ValkeyNodes %v %v", nodes.Items, err)
	}
	node := nodes.Items[0]
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns,
			Labels: map[string]string{v1.LabelCluster: vc.Name, v1.LabelShard: "0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "ValkeyNode", Name: node.Name, UID: node.UID,
				Controller: ptrTo(true)}}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "valkey", Image: "python:3", Command: []string{"python3", "-u", "-c", impostorServer}}}},
	}
	harness.Create(t, impostor)
	harness.WaitFor(t, "the impostor pod running", time.Minute, func() string {
		var p corev1.Pod
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(impostor), &p); err != nil {
			return err.Error()
		}
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return ""
		}
		return "phase " + string(p.Status.Phase)
	})
	// Three passes with the impostor running.
	harness.PassMark(t, vc)(3)
	if exited, code := harness.Op.Exited(); exited {
		t.Fatalf("the operator exited (%d)", code)
	}
	logs, err := harness.Kubectl(harness.Cluster, nil, "-n", ns, "logs", "impostor")
	if err != nil {
		t.Fatalf("kubectl logs: %v %s", err, logs)
	}
	if strings.Contains(string(logs), "connection from") {
		t.Errorf("the operator connected to the impostor:\n%s", logs)
	}
	cur := harness.CurrentCluster(t, vc)
	for _, n := range cur.Status.NodeDetails {
		if n.Pod == impostor.Name {
			t.Errorf("the impostor is in status.nodeDetails: %+v", n)
		}
	}
	harness.WaitReady(t, vc, 1, 0, map[string]bool{impostor.Name: true}, harness.FormTimeout) // the test's own Valkey check lists pods by label
}
