package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// TestDeletedNamespaceIsLeftAlone deletes the namespace of an Active cluster. The operator must
// leave the cluster alone while its objects go: no pod re-created into the terminating
// namespace, no `reconcile error, requeuing`, no credential regenerated or reported missing.
func TestDeletedNamespaceIsLeftAlone(t *testing.T) {
	ns := "doomed"
	harness.ActiveCluster(t, ns, 1, 0)
	warnings := func() (n int, lines []string) {
		for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
			if !strings.HasSuffix(l.Ref(), "."+ns) {
				continue
			}
			if l.Level == "WARN" || l.Level == "ERROR" || l.Message() == logging.MsgCreatingPod || l.Message() == logging.MsgCredentialMissing {
				n++
				lines = append(lines, l.Raw)
			}
		}
		return n, lines
	}
	before, _ := warnings()
	// Pods created before the deletion are expected; count only what comes after.
	if err := harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := harness.K8s.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still there after 2 minutes (get: %v)", ns, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // passes already queued run out
	if after, lines := warnings(); after != before {
		t.Fatalf("%d lines about the deleted namespace's cluster after its deletion:\n%s", after-before, strings.Join(lines, "\n"))
	}
}
