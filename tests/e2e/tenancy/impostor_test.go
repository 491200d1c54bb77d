package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestImpostorInPlaceOfANode: a team deletes the pod of one of its nodes and creates one of the
// same name, labels and controller reference, running a program that answers every command with
// `$-2` and logs what it is sent (harness.ImpostorImage). The operator never connects to it (no
// connection in its log, so never the operator's password), reports it (a WARN line, a Warning
// Event, Ready False with reason ForeignPod and status.message naming it), stays up (the same
// process, no panic in its log) and keeps reconciling another team's cluster (a podAnnotations
// change reaches its pod). Once the impostor is deleted the node is replaced, and the cluster is
// Ready again, checked in Valkey; and nodes whose record is cleared, as an operator before it left
// them, have their pods recorded again with none replaced. Before: the impostor was observed as the node, sent HELLO with
// the operator's credentials, and its reply made valkey-go panic on a goroutine of its own: the
// operator exited, again and again while the pod stood, for every team.
func TestImpostorInPlaceOfANode(t *testing.T) {
	ctx := context.Background()
	bystander := harness.ActiveCluster(t, "tenant-bystander", 1, 0)
	vc := harness.ActiveCluster(t, "tenant-replaced", 1, 1)
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	ns, pid := vc.Namespace, harness.Op.Pid()

	// Every node records the pod the operator created for it.
	var nodes v1.ValkeyNodeList
	if err := harness.K8s.List(ctx, &nodes, client.InNamespace(ns)); err != nil || len(nodes.Items) != 2 {
		t.Fatalf("ValkeyNodes %d, %v", len(nodes.Items), err)
	}
	for _, n := range nodes.Items {
		var p corev1.Pod
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.Name}, &p); err != nil {
			t.Fatal(err)
		}
		if n.Status.PodUID != string(p.UID) {
			t.Errorf("ValkeyNode %s records pod %q, its pod is %q", n.Name, n.Status.PodUID, p.UID)
		}
	}

	// The replica's pod, replaced by the impostor.
	victim := ""
	for _, n := range harness.CurrentCluster(t, vc).Status.NodeDetails {
		if n.Role == v1.NodeRoleReplica {
			victim = n.Pod
		}
	}
	var pod corev1.Pod
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &pod); err != nil {
		t.Fatalf("the replica's pod %q: %v", victim, err)
	}
	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns, Labels: pod.Labels, OwnerReferences: pod.OwnerReferences},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "valkey", Image: harness.ImpostorImage}}},
	}
	if err := harness.K8s.Delete(ctx, &pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "the impostor created in the node's place", time.Minute, func() string {
		err := harness.K8s.Create(ctx, impostor.DeepCopy())
		if err == nil {
			return ""
		}
		return err.Error() // AlreadyExists until the node's own pod is gone
	})
	harness.WaitFor(t, "the impostor running", time.Minute, func() string {
		var p corev1.Pod
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(impostor), &p); err != nil {
			return err.Error()
		}
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return ""
		}
		return "phase " + string(p.Status.Phase)
	})

	// Reported: status, the WARN line, the Event.
	harness.WaitFor(t, "the impostor in status", time.Minute, func() string {
		cur := harness.CurrentCluster(t, vc)
		ready := meta.FindStatusCondition(cur.Status.Conditions, v1.ConditionReady)
		if ready != nil && ready.Reason == controllers.ReasonForeignPod && strings.Contains(cur.Status.Message, "pod "+victim+" is not the pod the operator created") {
			return ""
		}
		return fmt.Sprintf("message %q, Ready %+v", cur.Status.Message, ready)
	})
	harness.WaitFor(t, "the impostor said at WARN", time.Minute, func() string {
		for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
			if l.Message() == logging.MsgNodePodForeign && l.Level == "WARN" && strings.HasSuffix(l.Ref(), "."+ns) && l.Fields[logging.FieldPod] == victim {
				return ""
			}
		}
		return "no " + logging.MsgNodePodForeign + " line"
	})
	harness.WaitFor(t, "the Warning Event", time.Minute, func() string {
		var evs eventsv1.EventList
		if err := harness.K8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == controllers.EventForeignObject && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "pod "+victim) {
				return ""
			}
		}
		return fmt.Sprintf("%d Events, none %s naming %s", len(evs.Items), controllers.EventForeignObject, victim)
	})

	// The other team's cluster is still reconciled: a change reaches its pod.
	patched := harness.CurrentCluster(t, bystander)
	patch := client.MergeFrom(patched.DeepCopy())
	patched.Spec.PodAnnotations = map[string]string{"example.com/team": "bystander"}
	if err := harness.K8s.Patch(ctx, patched, patch); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "the bystander's change applied", time.Minute, func() string {
		for _, p := range harness.Pods(t, bystander) {
			if p.Annotations["example.com/team"] != "bystander" {
				return "pod " + p.Name + " without the annotation"
			}
		}
		return ""
	})
	harness.PassMark(t, vc)(3) // and the impostor's own cluster, with the impostor running

	// Never connected to, so never given the operator's password.
	var cred corev1.Secret
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.CredentialSecretName(vc)}, &cred); err != nil {
		t.Fatal(err)
	}
	logs, err := harness.Kubectl(harness.Cluster, nil, "-n", ns, "logs", victim)
	if err != nil {
		t.Fatalf("kubectl logs: %v %s", err, logs)
	}
	if !strings.Contains(string(logs), "listening on") {
		t.Fatalf("the impostor's log is not its own:\n%s", logs)
	}
	if pw := cred.Data[resources.OperatorPasswordKey]; len(pw) == 0 || strings.Contains(string(logs), string(pw)) {
		t.Errorf("the impostor saw the operator's password (or there is none: %d bytes)", len(pw))
	}
	if strings.Contains(string(logs), "connection from") {
		t.Errorf("the operator connected to the impostor:\n%s", logs)
	}
	// The operator stayed up: the same process, no panic.
	if exited, code := harness.Op.Exited(); exited || harness.Op.Pid() != pid {
		t.Fatalf("the operator exited (%v, code %d) or was restarted", exited, code)
	}
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgReconcilePanicked || l.Message() == logging.MsgNodeStepPanicked || strings.Contains(l.Raw, "makeslice") {
			t.Errorf("a panic in the operator's log: %s", l.Raw)
		}
	}
	// The node's record and the impostor stand: nothing deleted, the node counted down.
	var stands corev1.Pod
	if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(impostor), &stands); err != nil {
		t.Fatalf("the impostor: %v", err)
	}
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &v1.ValkeyNode{}); err != nil {
		t.Fatalf("the node's ValkeyNode: %v", err)
	}

	// Deleted by its team, the impostor's node is replaced.
	if err := harness.K8s.Delete(ctx, &stands); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	cur := harness.CurrentCluster(t, vc)
	harness.VerifyValkey(t, cur, 1, 1)
	if slices.Contains(cur.Status.Nodes, victim) {
		t.Errorf("the replaced node %s is still in status.nodes", victim)
	}

	// Nodes without a record, as an operator before it left them: their pods, created with them,
	// are taken as theirs and recorded again, none replaced.
	if err := harness.K8s.List(ctx, &nodes, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pods := map[string]types.UID{}
	for _, n := range nodes.Items {
		var p corev1.Pod
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.Name}, &p); err != nil {
			t.Fatal(err)
		}
		pods[n.Name] = p.UID
		if err := harness.K8s.Status().Patch(ctx, &n, client.RawPatch(types.MergePatchType, []byte(`{"status":{"podUID":null}}`))); err != nil {
			t.Fatal(err)
		}
	}
	harness.WaitFor(t, "the nodes' pods recorded again", time.Minute, func() string {
		if err := harness.K8s.List(ctx, &nodes, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, n := range nodes.Items {
			if n.Status.PodUID != string(pods[n.Name]) {
				return fmt.Sprintf("%s records %q, its pod is %q", n.Name, n.Status.PodUID, pods[n.Name])
			}
		}
		return ""
	})
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	for _, p := range harness.Pods(t, vc) {
		if pods[p.Name] != p.UID {
			t.Errorf("pod %s was replaced", p.Name)
		}
	}
}

// TestACLFloodIsNotReadWhole: a team adds 40 users with 1 MB key patterns to the only node of its
// cluster through the node's open default user. The ACL controller does not read them whole: it
// says so at WARN (node holds far more ACL than its cluster declares, with the counts), puts the
// cluster's ACL back (the node holds only the file's users again), and the operator's resident
// memory grows by at most 30 MB. Before: ACL LIST was read whole and joined twice per node, and
// the operator's memory grew by about 240 MB (docs/dev/benchmarks.md).
func TestACLFloodIsNotReadWhole(t *testing.T) {
	vc := harness.ActiveCluster(t, "tenant-acl-flood", 1, 0)
	harness.WaitReady(t, vc, 1, 0, nil, harness.FormTimeout)
	pods := harness.Pods(t, vc)
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	c := harness.DefaultUserClient(t, pods[0])
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := harness.Op.RSS()
	if err != nil {
		t.Fatal(err)
	}
	pattern := "~" + strings.Repeat("k", 1<<20)
	for i := range 40 {
		if err := c.Do(ctx, c.B().AclSetuser().Username(fmt.Sprintf("flood-%02d", i)).Rule("on", "nopass", pattern, "+@all").Build()).Error(); err != nil {
			t.Fatalf("ACL SETUSER flood-%02d: %v", i, err)
		}
	}
	// The ACL controller looks on its tick (30 s): sample the operator's memory meanwhile.
	most := before
	harness.WaitFor(t, "the flood put back", 2*time.Minute, func() string {
		if rss, err := harness.Op.RSS(); err == nil {
			most = max(most, rss)
		}
		users, err := c.Do(ctx, c.B().AclUsers().Build()).AsStrSlice()
		if err != nil {
			return err.Error()
		}
		if slices.ContainsFunc(users, func(u string) bool { return strings.HasPrefix(u, "flood-") }) {
			return fmt.Sprintf("%d users on the node", len(users))
		}
		return ""
	})
	for range 10 { // and a little after
		time.Sleep(500 * time.Millisecond)
		if rss, err := harness.Op.RSS(); err == nil {
			most = max(most, rss)
		}
	}
	t.Logf("operator RSS %.1f MB before the flood, at most %.1f MB after it (growth %.1f MB)", before, most, most-before)
	if most-before > 30 {
		t.Errorf("the operator's memory grew by %.1f MB, want at most 30", most-before)
	}
	if !harness.LoggedWithPod(t, logging.MsgACLNodeOversized, vc.Namespace) {
		t.Errorf("the flood was not reported (%q)", logging.MsgACLNodeOversized)
	}
}
