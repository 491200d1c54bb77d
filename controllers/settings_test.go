package controllers

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
)

// A node's valkey.conf after its live settings changed holds the lines a node created now would
// get (here in the same order; a non-live directive sorted between two live ones would put them
// elsewhere, and each directive is set once, so order does not matter to Valkey).
func TestWithLiveSettingsMatchesANewNode(t *testing.T) {
	for _, tls := range []bool{false, true} {
		vc, rc := newTestCluster(), newResolved()
		announce := ""
		if tls {
			vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
			announce = "my-cluster-8c04d.my-cluster.my-app.svc.cluster.local"
		}
		rc.Valkey = map[string]string{"maxmemory": "1500mb", "maxmemory-policy": "allkeys-lru", "databases": "4"}
		before := resources.RenderValkeyConf(rc, announce)
		rc.Valkey = map[string]string{"maxmemory": "2gb", "hz": "20", "databases": "4"}
		want := resources.RenderValkeyConf(rc, announce)
		got := withLiveSettings(before, liveconf.Live(resources.ValkeySettings(rc, tls)))
		if got != want {
			t.Errorf("tls %v: rewritten\n%s\nwant\n%s", tls, got, want)
		}
		if again := withLiveSettings(got, liveconf.Live(resources.ValkeySettings(rc, tls))); again != got {
			t.Errorf("tls %v: rewriting twice changed the file", tls)
		}
	}
	// Every live setting removed: their lines go, the rest stays.
	conf := "# header\nport 6379\nhz 20\nmaxmemory 1gb\nsave \"\"\n"
	if got := withLiveSettings(conf, nil); got != "# header\nport 6379\nsave \"\"\n" {
		t.Errorf("removing every live setting: %q", got)
	}
	if strings.Contains(withLiveSettings("# hz 5\n", map[string]string{"hz": "6"}), "# hz 6") {
		t.Error("a comment was taken for a setting")
	}
}

// `applying settings live` is said once per node and change: a retry of the same values says
// nothing again, another change or the same one after it was applied does. A refusal is said in
// status while the pass still sets the same values on the node, and is gone in the pass that no
// longer does (the ValkeyConfig fixed, the node gone, the values run).
func TestLiveAttempts(t *testing.T) {
	var l liveAttempts
	bogus := changeKey([]liveconf.Change{{Key: "maxmemory-policy", Want: "sometimes"}})
	fixed := changeKey([]liveconf.Change{{Key: "maxmemory-policy", Want: "allkeys-lru"}})
	if bogus != "maxmemory-policy=sometimes" {
		t.Errorf("changeKey %q", bogus)
	}
	if !l.announce("ns/vc", "p0", bogus) || l.announce("ns/vc", "p0", bogus) {
		t.Error("a change must be announced once, not on its retry")
	}
	if !l.announce("ns/vc", "p1", bogus) || !l.announce("ns/other", "p0", bogus) {
		t.Error("another pod or cluster is another announcement")
	}
	reply := "config set maxmemory-policy on 10.0.0.1:6379: ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, …"
	if !l.refused("ns/vc", "p0", bogus, reply) || l.refused("ns/vc", "p0", bogus, reply) {
		t.Error("a refusal is new once (for its Event), not on every retry")
	}
	l.refused("ns/vc", "p1", bogus, reply)
	set := func(pod, want string) plan.SetConfig {
		return plan.SetConfig{Pod: pod, Set: []liveconf.Change{{Key: "maxmemory-policy", Want: want, Have: "noeviction"}}}
	}
	again := plan.Plan{Actions: []plan.Action{set("p0", "sometimes"), set("p1", "sometimes")}}
	want := "Valkey refused the live settings maxmemory-policy=sometimes on pod p0 (and 1 more): " + reply + "; " + settingsRefusedFix
	if got := l.standing("ns/vc", again); got != want {
		t.Errorf("standing:\n got %q\nwant %q", got, want)
	}
	if l.announce("ns/vc", "p0", bogus) {
		t.Error("a standing refusal's retry was announced again")
	}
	// One node gone from the plan (it runs the value now): the other still refuses.
	if got := l.standing("ns/vc", plan.Plan{Actions: []plan.Action{set("p1", "sometimes")}}); !strings.HasPrefix(got, "Valkey refused the live settings maxmemory-policy=sometimes on pod p1: ") {
		t.Errorf("one node left: %q", got)
	}
	// Fixed in the ValkeyConfig: the pass sets another value, the refusal is gone at once.
	if got := l.standing("ns/vc", plan.Plan{Actions: []plan.Action{set("p1", "allkeys-lru")}}); got != "" {
		t.Errorf("after the fix: %q", got)
	}
	if !l.announce("ns/vc", "p1", fixed) {
		t.Error("the fix is a new change, announced")
	}
	l.applied("ns/vc", "p1")
	if !l.announce("ns/vc", "p1", fixed) {
		t.Error("the same values after they were applied (a later drift back) are announced again")
	}
	l.forget("ns/vc")
	if got := l.standing("ns/vc", again); got != "" {
		t.Errorf("forgotten cluster: %q", got)
	}
}

// A {node}-config ConfigMap that its ValkeyNode does not control is never changed when the node's
// live settings are recorded: a WARN says so once per tick, and the ValkeyNode is still brought up
// to date.
func TestRecordLiveSettingsLeavesForeignConfigMap(t *testing.T) {
	vc := newTestCluster()
	vn := testNode(vc, "my-cluster-aaaaa", 0, v1.LifecycleActive)
	vn.Spec.ValkeySettings = map[string]string{"port": "6379", "maxmemory": "100mb"}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: vc.Namespace, Name: v1.NodeConfigMapName(vn.Name)},
		Data: map[string]string{resources.ConfigFileName: "maxmemory 100mb\n"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vc, vn, foreign).Build()
	r := &ValkeyClusterReconciler{Client: c, APIReader: c}
	obs := &observation{vc: vc, nodes: map[string]*v1.ValkeyNode{vn.Name: vn},
		snapshot: fsm.Snapshot{Settings: map[string]string{"port": "6379", "maxmemory": "200mb"}}}
	core, logs := observer.New(zap.InfoLevel)
	for range 3 {
		if err := r.setConfig(context.Background(), zap.New(core), obs, nil, plan.SetConfig{Pod: vn.Name}); err != nil {
			t.Fatal(err)
		}
	}
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[resources.ConfigFileName] != "maxmemory 100mb\n" {
		t.Errorf("the foreign ConfigMap was changed: %q", cm.Data[resources.ConfigFileName])
	}
	var got v1.ValkeyNode
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vn), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ValkeySettings["maxmemory"] != "200mb" {
		t.Errorf("ValkeyNode records %v", got.Spec.ValkeySettings)
	}
	warned := logs.FilterMessage(logging.MsgNodeConfigMapForeign).All()
	if len(warned) != 1 || warned[0].Level != zap.WarnLevel || warned[0].ContextMap()[logging.FieldConfigMap] != cm.Name ||
		warned[0].ContextMap()[logging.FieldPod] != vn.Name {
		t.Errorf("want one WARN %q naming pod and ConfigMap over 3 passes, got %v", logging.MsgNodeConfigMapForeign, warned)
	}
}
