package acl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// TestRotateSystemPasswords: a 3×1 on 8.0.1 under the 16-slot writer is asked, by its
// annotation, to rotate its system users' passwords. The rotation goes Adding → Switching →
// Retiring → Complete; afterwards every node refuses the old operator and replication passwords
// and accepts the new ones, and authenticates to its primary with the new one. No pod is
// replaced, no replica resyncs in full (sync_full unchanged), no replication link goes down while
// it runs, no write is refused and every acknowledged key reads back; a replica cut afterwards
// reconnects with the new password and a partial resync. No password (or its hash) is in the
// operator's log, an Event, the status or a ConfigMap.
func TestRotateSystemPasswords(t *testing.T) {
	vc := rotationCluster(t, "rotate", "8.0.1", 1)
	rotate(t, vc, "2026-12-08", false)
}

// TestRotateSystemPasswordsValkey9 is TestRotateSystemPasswords on a 3×2 on Valkey 9.1.2, with
// the operator SIGKILLed as each phase begins (its `system credentials rotation` line): the
// rotation ends the same.
func TestRotateSystemPasswordsValkey9(t *testing.T) {
	vc := rotationCluster(t, "rotate-9", localcluster.Valkey9Version, 2)
	rotate(t, vc, "ticket-1", true)
	// A second request rotates again, from the passwords the first one left.
	rotate(t, vc, "ticket-2", false)
}

// TestRotateSystemPasswords3x2 is TestRotateSystemPasswords on a 3×2 on 8.0.1, the operator
// SIGKILLed as each phase begins.
func TestRotateSystemPasswords3x2(t *testing.T) {
	vc := rotationCluster(t, "rotate-3x2", "8.0.1", 2)
	rotate(t, vc, "2026-12-08", true)
}

// TestRotateSystemPasswordsValkey9x1 is TestRotateSystemPasswords on a 3×1 on Valkey 9.1.2.
func TestRotateSystemPasswordsValkey9x1(t *testing.T) {
	vc := rotationCluster(t, "rotate-9x1", localcluster.Valkey9Version, 1)
	rotate(t, vc, "2026-12-08", false)
}

// rotationCluster is a Ready 3×replicas of version, its primaries spread (no spread failover
// in the middle of the rotation).
func rotationCluster(t *testing.T, ns, version string, replicas int32) *v1.ValkeyCluster {
	t.Helper()
	got := harness.ActiveCluster(t, ns, 3, replicas, version)
	harness.WaitReady(t, got, 3, int(replicas), nil, harness.FormTimeout)
	harness.WaitPrimariesSpread(t, got)
	harness.WaitReady(t, got, 3, int(replicas), nil, harness.FormTimeout)
	return got
}

// systemPasswords are the credential Secret's operator and replication passwords.
func systemPasswords(t *testing.T, vc *v1.ValkeyCluster) (op, repl string) {
	t.Helper()
	var s corev1.Secret
	if err := harness.K8s.Get(context.Background(), types.NamespacedName{Namespace: vc.Namespace, Name: vc.Name + "-operator-auth"}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["operator-password"]), string(s.Data["repl-password"])
}

// rotate asks vc for the rotation request and checks it (see TestRotateSystemPasswords); kill
// SIGKILLs the operator as each phase begins.
func rotate(t *testing.T, vc *v1.ValkeyCluster, request string, kill bool) {
	ns := vc.Namespace
	oldOp, oldRepl := systemPasswords(t, vc)
	uids := harness.PodUIDs(t, vc)
	syncs := harness.StatsSum(t, vc, "sync_full")
	w, opts := harness.StartClusterWriter(t, vc)
	time.Sleep(2 * time.Second)
	links := watchLinks(t, vc)
	logStart := len(harness.ParseLog(t, harness.Op.Logs()))

	start := time.Now()
	cur := harness.CurrentCluster(t, vc)
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[v1.AnnotationRotateSystemPasswords] = request
	if err := harness.K8s.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	if kill {
		// At each phase line a new operator has not said yet, until Complete: a phase passed
		// while the operator restarted is said by the new one, or not at all when it was over.
		from := logStart
		for range 3 {
			phase, at := waitPhaseLine(t, ns, from)
			if phase == v1.RotationComplete {
				break
			}
			harness.RestartOperator(t)
			t.Logf("operator killed as phase %s began", phase)
			from = at + 1
		}
	}
	var took time.Duration
	harness.WaitFor(t, "the rotation complete", 3*time.Minute, func() string {
		st := harness.CurrentCluster(t, vc).Status.PasswordRotation
		if st == nil || st.Request != request || st.Phase != v1.RotationComplete {
			return fmt.Sprintf("status.passwordRotation %+v", st)
		}
		took = time.Since(start)
		return ""
	})
	down := links.stop()
	t.Logf("rotation %q complete %s after the annotation", request, took.Round(time.Millisecond))

	newOp, newRepl := systemPasswords(t, vc)
	var cred corev1.Secret
	if err := harness.K8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: vc.Name + "-operator-auth"}, &cred); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{resources.OperatorPasswordNextKey, resources.ReplPasswordNextKey} {
		if _, ok := cred.Data[k]; ok {
			t.Errorf("credential Secret still holds %s after the rotation", k)
		}
	}
	if newOp == oldOp || newRepl == oldRepl || newOp == "" || newRepl == "" {
		t.Fatalf("credential Secret not rotated (operator password changed: %v, replication password changed: %v)", newOp != oldOp, newRepl != oldRepl)
	}
	for _, p := range harness.Pods(t, vc) {
		for _, c := range []struct {
			user, pw string
			accept   bool
		}{
			{"_momento_operator", oldOp, false}, {"_momento_repl", oldRepl, false}, {"_momento_migrate", migratePassword(oldOp), false},
			{"_momento_operator", newOp, true}, {"_momento_repl", newRepl, true}, {"_momento_migrate", migratePassword(newOp), true},
		} {
			_, err := harness.NodeDo(p, c.user, c.pw, "PING")
			if c.accept && err != nil {
				t.Errorf("%s refuses the new password of %s: %v", p.Name, c.user, err)
			}
			if !c.accept && (err == nil || !strings.Contains(err.Error(), "WRONGPASS")) {
				t.Errorf("%s: the old password of %s: %v, want WRONGPASS", p.Name, c.user, err)
			}
		}
		got, err := harness.NodeDo(p, "default", "", "CONFIG", "GET", "masterauth")
		if err != nil || !strings.Contains(got, newRepl) {
			t.Errorf("%s: masterauth is not the new replication password (%v)", p.Name, err)
		}
	}
	if after := harness.PodUIDs(t, vc); !maps.Equal(uids, after) {
		t.Errorf("pods replaced by a rotation: before %v, after %v", uids, after)
	}
	if after := harness.StatsSum(t, vc, "sync_full"); after != syncs {
		t.Errorf("full syncs %d before the rotation, %d after: a rotation resyncs no replica", syncs, after)
	}
	if down != "" {
		t.Errorf("a replication link went down during the rotation: %s", down)
	}
	phases := []string{}
	for _, l := range harness.ParseLog(t, harness.Op.Logs())[logStart:] {
		if !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		switch m := l.Message(); {
		case harness.FailoverLine(m) || m == logging.MsgRetiringNode || m == logging.MsgCreatingPod:
			t.Errorf("a rotation logged %q", m)
		case m == logging.MsgPasswordRotation && l.Level == "INFO":
			phases = append(phases, fmt.Sprint(l.Fields[logging.FieldPhase]))
		}
	}
	// Each phase is said once; across a restart a phase under way may be said again, and
	// Complete is not said by an operator killed between its status write and its line.
	got := strings.Join(phases, ",")
	if want := "Adding,Switching,Retiring,Complete"; !kill && got != want {
		t.Errorf("phase lines %s, want %s", got, want)
	}
	if kill && (!strings.HasPrefix(got, "Adding") || !strings.Contains(got, "Retiring")) {
		t.Errorf("phase lines %s, want Adding first and Retiring", got)
	}

	// A replica cut now reconnects with the new password, and resyncs partially.
	if vc.Spec.ReplicasPerShard > 0 {
		partial := harness.StatsSum(t, vc, "sync_partial_ok")
		cutReplica(t, vc)
		harness.WaitFor(t, "a partial resync after the cut", time.Minute, func() string {
			if n := harness.StatsSum(t, vc, "sync_partial_ok"); n <= partial {
				return fmt.Sprintf("sync_partial_ok %d", n)
			}
			return ""
		})
		if after := harness.StatsSum(t, vc, "sync_full"); after != syncs {
			t.Errorf("full syncs %d before the rotation, %d after the cut: want a partial resync", syncs, after)
		}
	}
	r := harness.FinishWriter(t, w, vc, opts)
	refused := 0
	for _, s := range r.Slots {
		refused += s.Failures
	}
	if refused > 0 || r.LostUnreplicated > 0 || r.LostReplicated > 0 {
		t.Errorf("%d writes refused, %d+%d acknowledged keys lost during a rotation: want 0\n%s", refused, r.LostReplicated, r.LostUnreplicated, r)
	}
	checkNoSecrets(t, vc, oldOp, oldRepl, newOp, newRepl)
}

// migratePassword is the migration user's password of a cluster whose operator password is op
// (derived, as for any cluster created by this operator).
func migratePassword(op string) string {
	return resources.MigratePassword(map[string][]byte{resources.OperatorPasswordKey: []byte(op)})
}

// waitPhaseLine waits for the operator's next `system credentials rotation` line in ns, from line
// from of its log on, and returns its phase and its index; every 50 ms, so that the caller acts
// at the phase's start.
func waitPhaseLine(t *testing.T, ns string, from int) (string, int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		lines := harness.ParseLog(t, harness.Op.Logs())
		for i := min(from, len(lines)); i < len(lines); i++ {
			l := lines[i]
			if l.Message() == logging.MsgPasswordRotation && strings.HasSuffix(l.Ref(), "."+ns) && l.Level == "INFO" {
				return fmt.Sprint(l.Fields[logging.FieldPhase]), i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line within 2m", logging.MsgPasswordRotation)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// links samples every replica's master_link_status every 200 ms.
type links struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	down string
}

// watchLinks starts sampling vc's replication links.
func watchLinks(t *testing.T, vc *v1.ValkeyCluster) *links {
	l := &links{done: make(chan struct{})}
	pods := harness.Pods(t, vc)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, p := range pods {
				info, err := harness.NodeDo(p, "default", "", "INFO", "replication")
				if err != nil || !strings.Contains(info, "role:slave") || strings.Contains(info, "master_link_status:up") {
					continue
				}
				l.mu.Lock()
				if l.down == "" {
					l.down = fmt.Sprintf("%s at %s", p.Name, time.Now().Format("15:04:05.000"))
				}
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// stop ends the sampling and says the first link seen down ("" for none).
func (l *links) stop() string {
	close(l.done)
	l.wg.Wait()
	return l.down
}

// cutReplica closes one replica's link to its primary (CLIENT KILL TYPE master on the replica).
func cutReplica(t *testing.T, vc *v1.ValkeyCluster) {
	t.Helper()
	for _, p := range harness.Pods(t, vc) {
		info, err := harness.NodeDo(p, "default", "", "INFO", "replication")
		if err != nil || !strings.Contains(info, "role:slave") {
			continue
		}
		c := harness.DefaultUserClient(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Do(ctx, c.B().ClientKill().TypeMaster().Build()).AsInt64()
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("cut %s from its primary: %v", p.Name, err)
		}
		t.Logf("cut %s from its primary", p.Name)
		return
	}
	t.Fatal("no replica to cut")
}

// checkNoSecrets fails when any of pws, or its SHA-256, is in the operator's log, an Event of
// vc's namespace, vc's status or a ConfigMap of its namespace.
func checkNoSecrets(t *testing.T, vc *v1.ValkeyCluster, pws ...string) {
	t.Helper()
	var needles []string
	for _, pw := range pws {
		h := sha256.Sum256([]byte(pw))
		needles = append(needles, pw, hex.EncodeToString(h[:]))
	}
	where := map[string]string{"the operator's log": string(harness.Op.Logs())}
	st := harness.CurrentCluster(t, vc).Status
	where["status"] = fmt.Sprintf("%+v %+v", st, st.PasswordRotation)
	var evs eventsv1.EventList
	if err := harness.K8s.List(context.Background(), &evs, client.InNamespace(vc.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		where["Event "+e.Name] = e.Note + " " + e.Reason
	}
	var cms corev1.ConfigMapList
	if err := harness.K8s.List(context.Background(), &cms, client.InNamespace(vc.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		where["ConfigMap "+cm.Name] = fmt.Sprint(cm.Data)
	}
	for name, text := range where {
		for i, n := range needles {
			if strings.Contains(text, n) {
				t.Errorf("%s holds password %d (or its hash)", name, i/2)
			}
		}
	}
}
