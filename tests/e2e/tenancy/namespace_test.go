package tenancy

import (
	"context"
	"fmt"
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
	// A cluster elsewhere whose passes prove the operator still works while nothing is said of
	// the deleted one: the check below must not pass with an operator that stopped.
	witness := harness.ActiveCluster(t, ns+"-witness", 1, 0)
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
	harness.WaitFor(t, "namespace "+ns+" gone", 2*time.Minute, func() string {
		err := harness.K8s.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("still there (get: %v)", err)
	})
	passed := harness.PassMark(t, witness)
	time.Sleep(2 * time.Second) // passes already queued run out
	passed(1)
	if after, lines := warnings(); after != before {
		t.Fatalf("%d lines about the deleted namespace's cluster after its deletion:\n%s", after-before, strings.Join(lines, "\n"))
	}
}
