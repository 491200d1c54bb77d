package controllers

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
)

// ReasonAwaitingConfirmation is the LiveSettingsHeld condition's reason.
const ReasonAwaitingConfirmation = "AwaitingConfirmation"

// Live settings changes that evict keys wait for a person (liveconf.Hold says which and why).
//
// Where the state lives. Nothing of the hold is kept by the operator: each pass decides it again
// for its own cluster from three things others keep, so an operator restarted at any moment
// decides the same, and the up to MaxConcurrentReconciles clusters reconciled at once never share
// or race on anything:
//   - what the cluster's nodes run: their ValkeyNodes' spec.valkeySettings, which only the
//     operator writes, after each CONFIG SET it verified (settings.go);
//   - what the spec asks for: the ValkeyConfig chain;
//   - what people confirmed: the valkey.gomomento.com/confirm-live-settings annotation of the
//     cluster (that cluster only) and of each config of its chain (every cluster on it).
//
// So "one cluster first, then the rest" is two confirmations: one on a cluster chosen to go
// first, then, once its evictions were looked at (valkey_node_evicted_keys_total), one on the
// ValkeyConfig. An automatic canary was weighed and left out: it needs a record that every
// cluster's pass reads and one writes ("which cluster goes first, did it pass"), on the
// ValkeyConfig's status (empty in the original's API, which the operator does not write) or on a
// cluster's; and its verdict proves little, since how many keys a cut evicts depends on each
// cluster's data, and a canary that holds little data evicts nothing. A team may confirm on its
// own cluster: that applies the change to its nodes only.

// holdEvictions applies liveconf.Hold to the pass: rc, with each held setting at the value the
// cluster's Active nodes run, so that the settings planner leaves it alone and a node created
// meanwhile starts like its neighbours; the held changes go into obs (the LiveSettingsHeld
// condition) and are said once per change (an INFO line and a Normal Event). rc itself when
// nothing is held.
func (r *ValkeyClusterReconciler) holdEvictions(log *zap.Logger, vc *v1.ValkeyCluster, rc *resources.ResolvedConfig, obs *observation) *resources.ResolvedConfig {
	var running []map[string]string
	for _, p := range obs.snapshot.LivePods() { // by pod name
		if p.Lifecycle == string(v1.LifecycleActive) && p.Settings != nil {
			running = append(running, p.Settings)
		}
	}
	confirmed := liveconf.ParseConfirmations(append([]string{vc.Annotations[v1.AnnotationConfirmLiveSettings]}, rc.Confirmations...)...)
	effective, held := liveconf.Hold(rc.Valkey, running, confirmed)
	obs.heldKnown, obs.held = true, heldMessage(held, rc.Chain)
	if len(held) == 0 {
		r.holds.forget(clusterKey(vc))
		return rc
	}
	names, want := make([]string, len(held)), make([]string, len(held))
	for i, h := range held {
		names[i], want[i] = h.Key, h.Confirmation()
	}
	if r.holds.announce(clusterKey(vc), strings.Join(want, ",")) {
		log.Info(logging.MsgSettingsHeld, zap.String(logging.FieldSettings, strings.Join(names, ",")), zap.String(logging.FieldWant, strings.Join(want, ",")))
		recordEvent(r.Events, vc, false, EventSettingsHeld, "Configure", "%s", obs.held)
	}
	out := *rc
	out.Valkey = effective
	return &out
}

// heldMessage is the LiveSettingsHeld condition's message: each held change, what the nodes keep,
// and the confirmation that applies them; "" when nothing is held. chain is the config chain,
// the cluster's own config first. Pure.
func heldMessage(held []liveconf.Held, chain []string) string {
	if len(held) == 0 {
		return ""
	}
	value := func(v, key string) string {
		if v == "" {
			d, _ := liveconf.Default(key)
			return d + " (Valkey's default)"
		}
		return v
	}
	var parts, keep, want []string
	removed := false
	for _, h := range held {
		switch h.Reason {
		case liveconf.HoldLower:
			parts = append(parts, fmt.Sprintf("maxmemory from %s to %s (a lower limit evicts keys at once)", value(h.Running, h.Key), h.Want))
		case liveconf.HoldRemoved:
			removed = true
			parts = append(parts, fmt.Sprintf("maxmemory %s removed (Valkey's default, 0, is no limit: a node may outgrow its memory)", h.Running))
		case liveconf.HoldPolicy:
			parts = append(parts, fmt.Sprintf("maxmemory-policy from %s to %s (another eviction policy)", value(h.Running, h.Key), value(h.Want, h.Key)))
		}
		keep = append(keep, h.Key+" "+value(h.Running, h.Key))
		want = append(want, h.Confirmation())
	}
	config := "its ValkeyConfig"
	if len(chain) > 0 {
		config = "ValkeyConfig " + chain[0]
	}
	msg := fmt.Sprintf("live settings held until confirmed: %s; the nodes keep %s. To apply, annotate this ValkeyCluster (this cluster only) or %s (every cluster on it) with %s=%s",
		strings.Join(parts, ", "), strings.Join(keep, ", "), config, v1.AnnotationConfirmLiveSettings, strings.Join(want, ","))
	if removed {
		msg += "; or set maxmemory in the ValkeyConfig"
	}
	return msg
}

// setHeldCondition sets LiveSettingsHeld on st: True with msg while a change is held, absent
// otherwise. Left as it was when the pass could not tell (the spec did not resolve: unknown is
// not absent). Pure.
func setHeldCondition(st *v1.ValkeyClusterStatus, gen int64, known bool, msg string) {
	switch {
	case !known:
	case msg == "":
		meta.RemoveStatusCondition(&st.Conditions, v1.ConditionLiveSettingsHeld)
	default:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionLiveSettingsHeld, Status: metav1.ConditionTrue,
			Reason: ReasonAwaitingConfirmation, Message: msg, ObservedGeneration: gen})
	}
}
