package controllers

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
)

// TestEvictingLiveChangesHeldUntilConfirmed, pass by pass on a formed 1×0 cluster whose node is
// scripted: a first maxmemory on nodes that run none, and a maxmemory removed, each send no
// CONFIG SET and set LiveSettingsHeld (said once, however many passes) until a confirmation of
// that value (on the ValkeyConfig, then on the cluster) applies it; an increase is applied at once.
func TestEvictingLiveChangesHeldUntilConfirmed(t *testing.T) {
	s := newSeamPass(t)
	for range 3 {
		s.pass(t)
	}
	editConfig := func(edit func(*v1.ValkeyConfig)) {
		t.Helper()
		var cfg v1.ValkeyConfig
		if err := s.c.Get(t.Context(), client.ObjectKey{Name: "cfg"}, &cfg); err != nil {
			t.Fatal(err)
		}
		edit(&cfg)
		if err := s.c.Update(t.Context(), &cfg); err != nil {
			t.Fatal(err)
		}
	}
	setConfig := func(cmds []string) []string {
		return slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return !strings.HasPrefix(c, "CONFIG SET") })
	}
	held := func(want string) {
		t.Helper()
		c := meta.FindStatusCondition(vcFor(t, s.c).Status.Conditions, v1.ConditionLiveSettingsHeld)
		switch {
		case want == "" && c != nil:
			t.Fatalf("LiveSettingsHeld %+v, want none", c)
		case want != "" && (c == nil || c.Status != "True" || !strings.Contains(c.Message, want)):
			t.Fatalf("LiveSettingsHeld %+v, want True saying %q", c, want)
		}
	}
	// said runs a pass and returns how often it said a hold, and the commands it sent.
	said := func() (int, []string) {
		t.Helper()
		s.fleet.Reset()
		_, logs, err := reconcileOnce(t, s.r)
		if err != nil {
			t.Fatal(err)
		}
		var cmds []string
		for _, c := range s.fleet.Calls() {
			cmds = append(cmds, strings.Join(c.Args, " "))
		}
		return logs.FilterMessage(logging.MsgSettingsHeld).Len(), cmds
	}

	// A first limit on nodes that run none: held, said once.
	editConfig(func(c *v1.ValkeyConfig) { c.Spec.Valkey = map[string]string{"maxmemory": "100mb", "hz": "20"} })
	n, cmds := said()
	if n != 1 {
		t.Fatalf("%q said %d times, want once", logging.MsgSettingsHeld, n)
	}
	if !slices.Equal(setConfig(cmds), []string{"CONFIG SET hz 20"}) {
		t.Fatalf("sent %v, want hz alone", setConfig(cmds))
	}
	held("maxmemory from 0 (Valkey's default) to 100mb")
	held("valkey.gomomento.com/confirm-live-settings=maxmemory=100mb")
	if n, cmds := said(); n != 0 || len(setConfig(cmds)) != 0 {
		t.Fatalf("a standing hold said again (%d) or set something (%v)", n, setConfig(cmds))
	}
	// A restarted operator (a reconciler with no memory) holds the same, and says it once more.
	fresh := &ValkeyClusterReconciler{Client: s.c, APIReader: s.c, DefaultZoneSpread: v1.ZoneSpreadBestEffort}
	fresh.conns.Dial = s.fleet.Dial
	t.Cleanup(func() { fresh.conns.Forget("ns/vc") })
	s.r = fresh
	if n, cmds := said(); n != 1 || len(setConfig(cmds)) != 0 {
		t.Fatalf("after a restart: said %d times, set %v; want said once and nothing set", n, setConfig(cmds))
	}
	held("maxmemory from 0 (Valkey's default) to 100mb")

	// Confirmed on the ValkeyConfig (in bytes): applied, the condition gone.
	editConfig(func(c *v1.ValkeyConfig) {
		c.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=104857600"}
	})
	if cmds, _ := s.pass(t); !slices.Equal(setConfig(cmds), []string{"CONFIG SET maxmemory 100mb"}) {
		t.Fatalf("sent %v after the confirmation", setConfig(cmds))
	}
	held("")

	// An increase: at once, with no confirmation.
	editConfig(func(c *v1.ValkeyConfig) { c.Spec.Valkey["maxmemory"] = "200mb" })
	if cmds, _ := s.pass(t); !slices.Equal(setConfig(cmds), []string{"CONFIG SET maxmemory 200mb"}) {
		t.Fatalf("sent %v for an increase", setConfig(cmds))
	}

	// Removed: held at 200mb, never 0 unasked.
	editConfig(func(c *v1.ValkeyConfig) { delete(c.Spec.Valkey, "maxmemory") })
	for range 2 {
		if cmds, _ := s.pass(t); len(setConfig(cmds)) != 0 {
			t.Fatalf("sent %v for a removed maxmemory", setConfig(cmds))
		}
	}
	held("maxmemory 200mb removed")
	held("confirm-live-settings=maxmemory=0")
	var vn v1.ValkeyNode
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-aaaaa"}, &vn); err != nil || vn.Spec.ValkeySettings["maxmemory"] != "200mb" {
		t.Fatalf("the node's record says maxmemory %q (%v), want the 200mb it runs", vn.Spec.ValkeySettings["maxmemory"], err)
	}

	// Confirmed on the cluster: 0 is set.
	vc := vcFor(t, s.c)
	vc.Annotations = map[string]string{v1.AnnotationConfirmLiveSettings: "maxmemory=0"}
	if err := s.c.Update(t.Context(), vc); err != nil {
		t.Fatal(err)
	}
	if cmds, _ := s.pass(t); !slices.Equal(setConfig(cmds), []string{"CONFIG SET maxmemory 0"}) {
		t.Fatalf("sent %v after the removal was confirmed", setConfig(cmds))
	}
	held("")
}

// The condition's message names each change, what the nodes keep and the one confirmation that
// applies them all.
func TestHeldMessage(t *testing.T) {
	msg := heldMessage([]liveconf.Held{
		{Key: "maxmemory", Running: "100mb", Want: "4mb", Reason: liveconf.HoldLower},
		{Key: "maxmemory-policy", Running: "allkeys-lru", Reason: liveconf.HoldPolicy},
	}, []string{"team", "shared"})
	for _, want := range []string{
		"maxmemory from 100mb to 4mb (a lower limit evicts keys at once)",
		"maxmemory-policy from allkeys-lru to noeviction (Valkey's default) (another eviction policy)",
		"the nodes keep maxmemory 100mb, maxmemory-policy allkeys-lru",
		"ValkeyConfig team (every cluster on it)",
		"valkey.gomomento.com/confirm-live-settings=maxmemory=4mb,maxmemory-policy=noeviction",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	removed := heldMessage([]liveconf.Held{{Key: "maxmemory", Running: "4mb", Reason: liveconf.HoldRemoved}}, []string{"shared"})
	for _, want := range []string{"maxmemory 4mb removed (Valkey's default, 0, is no limit", "=maxmemory=0; or set maxmemory in the ValkeyConfig"} {
		if !strings.Contains(removed, want) {
			t.Errorf("%q lacks %q", removed, want)
		}
	}
	if heldMessage(nil, nil) != "" {
		t.Error("a message with nothing held")
	}
}
