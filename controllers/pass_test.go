package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// passFixture is one ValkeyCluster "vc" in namespace "ns" with its config and image, in a fake
// API server (the reconciler reads and writes through it; the tests assert on what it holds).
type passFixture struct {
	vc      *v1.ValkeyCluster
	objects []client.Object
	funcs   interceptor.Funcs
}

func newPassFixture() *passFixture {
	vc := &v1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: "ns", UID: "0d7a3f3c-0000-4000-8000-0000000000aa", Generation: 1},
		Spec:       v1.ValkeyClusterSpec{ConfigRef: "cfg", Shards: 1},
	}
	return &passFixture{vc: vc, objects: []client.Object{
		vc,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		&v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"}},
		&v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Spec: v1.ValkeyConfigSpec{ImageRef: "img"}},
	}}
}

// withPod adds a Running pod of the cluster at ip.
func (f *passFixture) withPod(name, ip string) *passFixture {
	rc := &resources.ResolvedConfig{Image: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1"}}
	vn := resources.BuildValkeyNode(f.vc, rc, name, 0, "")
	vn.UID = types.UID("vn-" + name)
	pod := resources.BuildPod(f.vc, rc, vn, "h", v1.ZoneSpreadBestEffort)
	pod.UID = types.UID("pod-" + name)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}
	f.objects = append(f.objects, vn, pod)
	return f
}

func (f *passFixture) withCredential(password string) *passFixture {
	f.objects = append(f.objects, &corev1.Secret{
		ObjectMeta: resources.ObjectMeta(f.vc, resources.CredentialSecretName(f.vc)), Data: map[string][]byte{resources.OperatorPasswordKey: []byte(password)}})
	return f
}

func (f *passFixture) build(t testing.TB) (*ValkeyClusterReconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(f.objects...).
		WithStatusSubresource(&v1.ValkeyCluster{}, &v1.ValkeyNode{}).WithInterceptorFuncs(f.funcs).
		WithIndex(&corev1.Pod{}, IndexByCluster, clusterLabel).WithIndex(&v1.ValkeyNode{}, IndexByCluster, clusterLabel).Build()
	return &ValkeyClusterReconciler{Client: c, APIReader: c, DefaultZoneSpread: v1.ZoneSpreadBestEffort}, c
}

func reconcileOnce(t testing.TB, r *ValkeyClusterReconciler) (ctrl.Result, *observer.ObservedLogs, error) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	ctx := logging.IntoContext(t.Context(), zap.New(core))
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}})
	return res, logs, err
}

func podCount(t *testing.T, c client.Client) int {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// A credential Secret deleted under a cluster that has pods is never regenerated: the pass
// changes nothing, logs the WARN naming Secret and key, and says why in status.
func TestCredentialNotRegeneratedUnderPods(t *testing.T) {
	r, c := newPassFixture().withPod("vc-aaaaa", "10.1.0.1").build(t)
	res, logs, err := reconcileOnce(t, r)
	if err != nil || res.RequeueAfter != TickInterval {
		t.Fatalf("result %+v, %v; want a requeue on the tick and no error", res, err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-operator-auth"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the credential Secret was regenerated (get: %v)", err)
	}
	for name, obj := range map[string]client.Object{"vc-acl": &corev1.Secret{}, "vc": &corev1.Service{}} {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Fatalf("%T %s was written while the credential is missing (get: %v)", obj, name, err)
		}
	}
	if n := podCount(t, c); n != 1 {
		t.Fatalf("%d pods, want the 1 that was there", n)
	}
	warns := logs.FilterMessage(logging.MsgCredentialMissing).All()
	if len(warns) != 1 || warns[0].Level != zap.WarnLevel ||
		warns[0].ContextMap()[logging.FieldSecret] != "vc-operator-auth" || warns[0].ContextMap()[logging.FieldKey] != resources.OperatorPasswordKey {
		t.Fatalf("log lines: %+v", logs.All())
	}
	vc := vcFor(t, c)
	cond := meta.FindStatusCondition(vc.Status.Conditions, v1.ConditionDegraded)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonCredentialMissing ||
		!strings.Contains(vc.Status.Message, "vc-operator-auth") || !strings.Contains(vc.Status.Message, "not regenerated") {
		t.Fatalf("status: message %q, conditions %+v", vc.Status.Message, vc.Status.Conditions)
	}
	// A second pass in the same tick: no second WARN.
	if _, logs, _ = reconcileOnce(t, r); logs.FilterMessage(logging.MsgCredentialMissing).Len() != 0 {
		t.Fatal("the WARN is repeated within a tick")
	}
}

// A brand-new cluster (no pod yet) gets its credential generated, silently.
func TestCredentialGeneratedForNewCluster(t *testing.T) {
	r, c := newPassFixture().build(t)
	if _, logs, err := reconcileOnce(t, r); err != nil || logs.FilterMessage(logging.MsgCredentialMissing).Len() != 0 {
		t.Fatalf("%v, %+v", err, logs.All())
	}
	var s corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-operator-auth"}, &s); err != nil || len(s.Data[resources.OperatorPasswordKey]) == 0 {
		t.Fatalf("no credential generated for a new cluster: %v", err)
	}
	// The original's keys and lengths (security/index.md), nothing more.
	if len(s.Data) != 2 {
		t.Errorf("credential keys %v, want operator-password and repl-password", slices.Collect(maps.Keys(s.Data)))
	}
	for _, k := range []string{"operator-password", "repl-password"} {
		if v := string(s.Data[k]); !regexp.MustCompile(`^[0-9a-f]{128}$`).MatchString(v) {
			t.Errorf("%s is %d characters, want 128 hex", k, len(v))
		}
	}
	if n := podCount(t, c); n != 1 {
		t.Fatalf("%d pods created, want 1", n)
	}
}

// A credential Secret an older operator made (keys password, repl-password, migrate-password,
// 64 hex) is used as it is: not rewritten, its passwords the ones the nodes' ACL holds.
func TestOlderCredentialKeptAsIs(t *testing.T) {
	f := newPassFixture().withPod("vc-aaaaa", "10.0.0.1")
	older := map[string][]byte{"password": []byte(strings.Repeat("a", 64)), "repl-password": []byte(strings.Repeat("b", 64)), "migrate-password": []byte(strings.Repeat("c", 64))}
	f.objects = append(f.objects, &corev1.Secret{ObjectMeta: resources.ObjectMeta(f.vc, resources.CredentialSecretName(f.vc)), Data: older})
	r, c := f.build(t)
	if _, logs, err := reconcileOnce(t, r); err != nil || logs.FilterMessage(logging.MsgCredentialMissing).Len() != 0 {
		t.Fatalf("%v, %+v", err, logs.All())
	}
	var s corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-operator-auth"}, &s); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(s.Data, older, bytes.Equal) {
		t.Errorf("the older Secret was rewritten: keys %v", slices.Collect(maps.Keys(s.Data)))
	}
	var aclSecret corev1.Secret
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-acl"}, &aclSecret); err != nil {
		t.Fatal(err)
	}
	file := string(aclSecret.Data[resources.ACLFileName])
	for user, pw := range map[string]string{"_momento_operator": "password", "_momento_repl": "repl-password", "_momento_migrate": "migrate-password"} {
		sum := sha256.Sum256(older[pw])
		if !strings.Contains(file, "user "+user+" ") || !strings.Contains(file, "#"+hex.EncodeToString(sum[:])) {
			t.Errorf("the ACL file does not give %s the hash of %s", user, pw)
		}
	}
}

// The clusters of a namespace being deleted are left alone: nothing created, no error.
func TestTerminatingNamespaceLeftAlone(t *testing.T) {
	f := newPassFixture()
	f.objects[1].(*corev1.Namespace).Status.Phase = corev1.NamespaceTerminating
	r, c := f.build(t)
	res, logs, err := reconcileOnce(t, r)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v; want nothing", res, err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-operator-auth"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Secret was created in a terminating namespace (get: %v)", err)
	}
	if n := podCount(t, c); n != 0 || logs.Len() != 0 {
		t.Fatalf("%d pods, log %+v", n, logs.All())
	}
}

// A create refused because the namespace is terminating (the namespace read raced with its
// deletion) ends the pass without an error, so nothing logs `reconcile error, requeuing`.
func TestCreateRefusedInTerminatingNamespaceIsNoError(t *testing.T) {
	f := newPassFixture().withCredential("pw")
	f.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("unable to create new content in namespace ns because it is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated"}}
		return err
	}
	r, _ := f.build(t)
	if res, _, err := reconcileOnce(t, r); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v; want nothing", res, err)
	}
	// Any other refusal is still an error.
	f.funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("quota"))
	}
	r, _ = f.build(t)
	if _, _, err := reconcileOnce(t, r); !apierrors.IsForbidden(err) {
		t.Fatalf("a plain Forbidden was swallowed: %v", err)
	}
}

// A pass whose node hangs (the socket accepts, nothing replies) or whose API calls do not return
// ends within its budget with an ordinary error or result, never a panic, so one slow cluster
// cannot hold a worker.
func TestPassBudget(t *testing.T) {
	t.Run("API hangs", func(t *testing.T) {
		f := newPassFixture().withCredential("pw")
		f.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1.ValkeyCluster); ok {
				<-ctx.Done()
				return ctx.Err()
			}
			return c.Get(ctx, key, obj, opts...)
		}
		r, _ := f.build(t)
		r.PassBudget = 300 * time.Millisecond
		start := time.Now()
		_, _, err := reconcileOnce(t, r)
		if !errors.Is(err, errPassBudget) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v; want the pass budget exceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("the pass took %s", d)
		}
	})
	t.Run("node hangs", func(t *testing.T) {
		// A node that accepts the connection and never answers anything, HELLO included.
		fleet := valkeytest.New()
		release := make(chan struct{})
		defer close(release)
		fleet.Node(nodeAddr("127.0.0.77")).OnFunc("", func([]string) valkeytest.Reply {
			<-release
			return valkeytest.OK()
		})
		f := newPassFixture().withCredential("pw").withPod("vc-aaaaa", "127.0.0.77")
		f.vc.Status.State = v1.StateActive
		r, _ := f.build(t)
		r.conns.Dial = fleet.Dial
		r.PassBudget = time.Second
		start := time.Now()
		_, _, _ = reconcileOnce(t, r) // any ordinary outcome; a panic fails the test
		if d := time.Since(start); d > r.PassBudget+3*time.Second {
			t.Fatalf("the pass took %s with a budget of %s", d, r.PassBudget)
		}
	})
}

// vcFor reads the cluster back from the fake API server.
func vcFor(t *testing.T, c client.Client) *v1.ValkeyCluster {
	t.Helper()
	var vc v1.ValkeyCluster
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc"}, &vc); err != nil {
		t.Fatal(err)
	}
	return &vc
}
