package controllers

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"go.uber.org/zap"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// Whole passes through the Valkey seam: the reconciler against a fake API server and one
// simulated node (valkeytest.Simulate), a 1×0 cluster. What a pass asks every node, and what a
// pass on a formed cluster costs, are read from here; that the operator forms a real cluster is
// the end-to-end tests' to show.

// observeCommands are the four queries a pass asks every node, in order.
var observeCommands = []string{
	"CLUSTER NODES",
	"CLUSTER INFO",
	"INFO server replication memory clients stats keyspace",
	"CONFIG GET hz latency-monitor-threshold lazyfree-lazy-eviction lazyfree-lazy-expire maxclients maxmemory maxmemory-policy maxmemory-samples slowlog-log-slower-than slowlog-max-len timeout",
}

// seamPass is a 1×0 cluster whose pod vc-aaaaa runs at 10.0.0.1, its node simulated; writes
// counts the API writes the reconciler makes.
type seamPass struct {
	r      *ValkeyClusterReconciler
	c      client.Client
	fleet  *valkeytest.Fleet
	writes atomic.Int32
}

func newSeamPass(tb testing.TB) *seamPass {
	s := &seamPass{fleet: valkeytest.New()}
	pf := newPassFixture().withPod("vc-aaaaa", "10.0.0.1").withCredential("pw")
	count := func() { s.writes.Add(1) }
	pf.funcs = interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, o, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count()
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	}
	s.r, s.c = pf.build(tb)
	valkeytest.Simulate(s.fleet.Node("10.0.0.1:6379"), strings.Repeat("a", 40), "10.0.0.1")
	s.r.conns.Dial = s.fleet.Dial
	tb.Cleanup(func() { s.r.conns.Forget("ns/vc") })
	return s
}

// pass runs one pass and returns the commands it sent, and its API writes.
func (s *seamPass) pass(t testing.TB) ([]string, int) {
	t.Helper()
	s.fleet.Reset()
	s.writes.Store(0)
	if _, _, err := reconcileOnce(t, s.r); err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, c := range s.fleet.Calls() {
		cmds = append(cmds, strings.Join(c.Args, " "))
	}
	return cmds, int(s.writes.Load())
}

// TestPassThroughTheSeam: the first pass observes the node and assigns it every slot, the
// next sees the cluster formed and goes Active; from then on a pass asks the node its four
// queries and nothing else, and writes nothing to the API server.
func TestPassThroughTheSeam(t *testing.T) {
	s := newSeamPass(t)
	cmds, _ := s.pass(t)
	if want := append(slices.Clone(observeCommands), "CLUSTER ADDSLOTSRANGE 0 16383"); !slices.Equal(cmds, want) {
		t.Fatalf("first pass sent:\n  %s\nwant:\n  %s", strings.Join(cmds, "\n  "), strings.Join(want, "\n  "))
	}
	if cmds, _ = s.pass(t); !slices.Equal(cmds, observeCommands) {
		t.Fatalf("second pass sent:\n  %s", strings.Join(cmds, "\n  "))
	}
	if vc := vcFor(t, s.c); vc.Status.State != v1.StateActive {
		t.Fatalf("state %q after the second pass, want Active", vc.Status.State)
	}
	s.pass(t) // the cluster's first pass as Active settles its budget (formation asks for one copy)
	for range 3 {
		cmds, writes := s.pass(t)
		if !slices.Equal(cmds, observeCommands) || writes != 0 {
			t.Fatalf("a steady pass sent:\n  %s\nand made %d API writes, want the four queries and none", strings.Join(cmds, "\n  "), writes)
		}
	}
}

// BenchmarkSteadyPass is one pass of a formed 1×0 cluster, through the seam and a fake API
// server: the operator's own CPU and allocations per pass, which a fleet pays once per cluster
// per observation interval (healthyInterval). Run: go test -run '^$' -bench SteadyPass ./controllers/
func BenchmarkSteadyPass(b *testing.B) {
	s := newSeamPass(b)
	for range 4 {
		s.pass(b)
	}
	ctx := logging.IntoContext(b.Context(), zap.NewNop())
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// apiReads counts the reads made through it, by kind and verb ("get Secret vc-credential").
type apiReads struct {
	client.Reader
	mu sync.Mutex
	n  map[string]int
}

func (a *apiReads) count(verb string, obj any, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[fmt.Sprintf("%s %T %s", verb, obj, name)]++
}

func (a *apiReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	a.count("get", obj, key.Name)
	return a.Reader.Get(ctx, key, obj, opts...)
}

func (a *apiReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	a.count("list", list, "")
	return a.Reader.List(ctx, list, opts...)
}

func (a *apiReads) take() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.n
	a.n = nil
	return n
}

// TestSteadyPassAPIReads: what a steady pass of a formed cluster still reads from the API server,
// with the reader the operator uses (SecretsByVersion over the API server, the cache beside it):
// not its cluster (the cache shows the version the last pass ended with), not its Secrets (their
// versions did not move); only what must see the pass's own writes and the namespace.
func TestSteadyPassAPIReads(t *testing.T) {
	s := newSeamPass(t)
	reads := &apiReads{Reader: s.c}
	s.r.APIReader = SecretsByVersion(reads, s.c)
	// The manager's client reads Secrets and ConfigMaps from the API server too (ClientOptions).
	s.r.Client = uncachedKinds{Client: s.c, api: reads}
	for range 4 {
		s.pass(t)
	}
	reads.take()
	s.pass(t)
	got := reads.take()
	want := map[string]int{
		"get *v1.Namespace ns":              1,
		"list *v1.PodList ":                 1,
		"list *v1alpha1.ValkeyNodeList ":    1,
		"list *v1.PodDisruptionBudgetList ": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("a steady pass read from the API server:\n  %v\nwant:\n  %v", got, want)
	}
}

// uncachedKinds is the manager's client as ClientOptions makes it: Secrets and ConfigMaps are read
// from the API server (api), everything else from the cache (the embedded client).
type uncachedKinds struct {
	client.Client
	api client.Reader
}

func (u uncachedKinds) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *corev1.Secret, *corev1.ConfigMap:
		return u.api.Get(ctx, key, obj, opts...)
	}
	return u.Client.Get(ctx, key, obj, opts...)
}

func (u uncachedKinds) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *corev1.SecretList, *corev1.ConfigMapList:
		return u.api.List(ctx, list, opts...)
	}
	return u.Client.List(ctx, list, opts...)
}

// TestPassRestoresTheACLSecretAndAnnotations: on a formed, steady cluster, an ACL Secret edited
// by hand and a podAnnotation added to the spec are each one action of the next pass (one API
// write each, no Valkey command beyond the observation), after which the passes are steady
// again: no action, no write.
func TestPassRestoresTheACLSecretAndAnnotations(t *testing.T) {
	s := newSeamPass(t)
	for range 4 {
		s.pass(t)
	}
	vc := vcFor(t, s.c)
	var secret corev1.Secret
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: resources.ACLSecretName(vc)}, &secret); err != nil {
		t.Fatal(err)
	}
	rendered := maps.Clone(secret.Data)
	secret.Data = map[string][]byte{"users.acl": []byte("user default on nopass ~* +@all")}
	if err := s.c.Update(t.Context(), &secret); err != nil {
		t.Fatal(err)
	}
	vc.Spec.PodAnnotations = map[string]string{"example.com/team": "cache"}
	if err := s.c.Update(t.Context(), vc); err != nil {
		t.Fatal(err)
	}
	if cmds, writes := s.pass(t); !slices.Equal(cmds, observeCommands) || writes != 2 {
		t.Fatalf("the pass after the edits sent:\n  %s\nand made %d API writes, want the four queries and two", strings.Join(cmds, "\n  "), writes)
	}
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(&secret), &secret); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(secret.Data, rendered, bytes.Equal) {
		t.Fatalf("ACL Secret not restored: %q", secret.Data)
	}
	var pod corev1.Pod
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-aaaaa"}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Annotations["example.com/team"] != "cache" {
		t.Fatalf("pod annotations %v", pod.Annotations)
	}
	for range 2 {
		if cmds, writes := s.pass(t); !slices.Equal(cmds, observeCommands) || writes != 0 {
			t.Fatalf("a steady pass sent:\n  %s\nand made %d API writes, want the four queries and none", strings.Join(cmds, "\n  "), writes)
		}
	}
}

// TestNodeErrorTextCapped: a node whose reply to CONFIG GET is an error of a megabyte (a team's
// program answering for a node, say) reaches status.message, the Ready condition and the WARN
// line's error field as at most logging.MaxText bytes each, its beginning kept.
func TestNodeErrorTextCapped(t *testing.T) {
	s := newSeamPass(t)
	for range 3 {
		s.pass(t)
	}
	huge := "ERR " + strings.Repeat("x", 1<<20)
	s.fleet.Node("10.0.0.1:6379").On("CONFIG GET", valkeytest.Err(huge))
	s.fleet.Reset()
	_, logs, err := reconcileOnce(t, s.r)
	if err != nil {
		t.Fatal(err)
	}
	vc := vcFor(t, s.c)
	if n := len(vc.Status.Message); n == 0 || n > logging.MaxText || !strings.Contains(vc.Status.Message, "xxxxxxxxxx") {
		t.Errorf("status.message of %d bytes (at most %d, quoting the reply): %.120s", n, logging.MaxText, vc.Status.Message)
	}
	for _, c := range vc.Status.Conditions {
		if len(c.Message) > logging.MaxText {
			t.Errorf("condition %s: message of %d bytes", c.Type, len(c.Message))
		}
	}
	said := false
	for _, e := range logs.FilterMessage(logging.MsgSettingsUnreadable).All() {
		line, err := logging.NewEncoder().EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		if n := line.Len(); n > 2*logging.MaxText {
			t.Errorf("the WARN line is %d bytes", n)
		}
		said = strings.Contains(line.String(), "xxxxxxxxxx")
	}
	if !said {
		t.Errorf("no %q line quoting the reply", logging.MsgSettingsUnreadable)
	}
}
