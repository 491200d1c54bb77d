package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// setConfig carries out a plan.SetConfig: one CONFIG SET of the settings on the node, one
// CONFIG GET to verify that the node runs them as Valkey reads them back, then the node's
// record (its ConfigMap, then its ValkeyNode) takes the desired live settings, so that a reader
// of the record, and the next pass, see what runs. A value Valkey refuses is returned with its
// reply: the pass's `reconcile error, requeuing` says it, and it is retried at the look
// interval (reportedError: the status says it, so the back-off does not grow); the node is never
// replaced for it. The refusal is remembered (r.live) so that the next passes'
// status.message says it while the same values stay refused, and `applying settings live` is
// said once per node and change, not once per retry.
func (r *ValkeyClusterReconciler) setConfig(ctx context.Context, log *zap.Logger, obs *observation, node func(string) (*valkey.Client, error), a plan.SetConfig) error {
	if len(a.Set) > 0 {
		c, err := node(a.Pod)
		if err != nil {
			return err
		}
		cluster, change := obs.clusterKey(), changeKey(a.Set)
		var changed []string
		params := map[string]string{}
		announce := r.live.announce(cluster, a.Pod, change)
		for _, ch := range a.Set {
			params[ch.Key] = ch.Want
			if !slices.Contains(a.Drift, ch.Key) {
				changed = append(changed, ch.Key)
			} else if announce {
				log.Warn(logging.MsgSettingDrifted, logging.Pod(a.Pod), zap.String(logging.FieldSetting, ch.Key),
					zap.String(logging.FieldValue, ch.Have), zap.String(logging.FieldWant, ch.Want))
			}
		}
		if len(changed) > 0 && announce {
			log.Info(logging.MsgApplyingSettingsLive, logging.Pod(a.Pod), zap.String(logging.FieldSettings, strings.Join(changed, ",")))
		}
		if err := c.ConfigSet(ctx, params); err != nil {
			if valkey.IsServerError(err) {
				r.refusedSettings(obs, a.Pod, change, err)
				return reported(err)
			}
			return err
		}
		got, err := c.ConfigGet(ctx, slices.Sorted(maps.Keys(params))...)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(params)) {
			if !liveconf.Equal(k, params[k], got[k]) {
				err := fmt.Errorf("%s reads back %q after CONFIG SET %q", k, got[k], params[k])
				r.refusedSettings(obs, a.Pod, change, err)
				return reported(err)
			}
		}
		r.live.applied(cluster, a.Pod)
	}
	return r.recordLiveSettings(ctx, log, obs, a.Pod)
}

// refusedSettings remembers that pod's node refused change, and says so in an Event the first
// time (a retry of the same refusal is the pass's error again, not another Event).
func (r *ValkeyClusterReconciler) refusedSettings(obs *observation, pod, change string, err error) {
	if r.live.refused(obs.clusterKey(), pod, change, err.Error()) && obs.vc != nil {
		recordEvent(r.Events, obs.vc, true, EventSettingsRefused, "Configure", "pod %s: %s; %s", pod, err, settingsRefusedFix)
	}
}

// recordLiveSettings makes the record of the node of pod say that it runs the desired live
// settings: its {node}-config ConfigMap's valkey.conf first, then its ValkeyNode's
// spec.valkeySettings (the admission rule lets only the live settings change). The ValkeyNode
// goes last: once it agrees, the planner has nothing left to do for the node, so an operator
// that stops between the two writes finishes both on a later pass.
//
// A ConfigMap of that name that the ValkeyNode does not control is never changed: it is said
// (WARN and a Warning Event, once per tick per node) and the ValkeyNode is still brought up to
// date.
func (r *ValkeyClusterReconciler) recordLiveSettings(ctx context.Context, log *zap.Logger, obs *observation, pod string) error {
	vn, ok := obs.nodes[pod]
	if !ok || vn.DeletionTimestamp != nil {
		return nil
	}
	live := liveconf.Live(obs.snapshot.Settings)
	settings := liveconf.WithoutLive(vn.Spec.ValkeySettings)
	if settings == nil {
		settings = map[string]string{}
	}
	maps.Copy(settings, live)

	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: vn.Namespace, Name: v1.NodeConfigMapName(vn.Name)}
	switch err := r.APIReader.Get(ctx, key, &cm); {
	case apierrors.IsNotFound(err):
		// A node without its ConfigMap is a lost node's: its pod cannot have started.
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", key.Name, err)
	case !metav1.IsControlledBy(&cm, vn):
		// Own before you touch: another object took the name (the node's own was deleted). The
		// node runs what it runs; its record below still says so.
		if r.ticks.due("foreign-config/"+obs.clusterKey()+"/"+pod, time.Now()) {
			log.Warn(logging.MsgNodeConfigMapForeign, logging.Pod(pod), zap.String(logging.FieldConfigMap, cm.Name))
			if obs.vc != nil {
				recordEvent(r.Events, obs.vc, true, EventForeignObject, "Configure",
					"ConfigMap %s is not controlled by ValkeyNode %s: the live settings of pod %s are not recorded in it and it is not changed; delete or rename it", cm.Name, vn.Name, pod)
			}
		}
	default:
		if conf := withLiveSettings(cm.Data[resources.ConfigFileName], live); conf != cm.Data[resources.ConfigFileName] {
			cm.Data[resources.ConfigFileName] = conf
			if err := r.Update(ctx, &cm); err != nil {
				return fmt.Errorf("update ConfigMap %s: %w", key.Name, err)
			}
		}
	}
	if maps.Equal(settings, vn.Spec.ValkeySettings) {
		return nil
	}
	vn = vn.DeepCopy()
	vn.Spec.ValkeySettings = settings
	if err := r.Update(ctx, vn); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record live settings of ValkeyNode %s: %w", vn.Name, err)
	}
	obs.nodes[pod] = vn
	return nil
}

// withLiveSettings rewrites a node's valkey.conf so that its live settings are live, and no
// other: every line of a live setting is dropped, and live's lines, sorted, take the place of the
// first one dropped (else go before the node's own cluster-announce-hostname line, else at the
// end). Every other line is kept as it was: the node runs it.
func withLiveSettings(conf string, live map[string]string) string {
	lines := strings.SplitAfter(conf, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var add []string
	for _, k := range slices.Sorted(maps.Keys(live)) {
		add = append(add, k+" "+live[k]+"\n")
	}
	var out []string
	at := -1
	for _, l := range lines {
		directive, _, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch {
		case !strings.HasPrefix(l, "#") && liveconf.IsLive(directive):
			if at < 0 {
				at = len(out)
			}
			continue
		case directive == "cluster-announce-hostname" && at < 0:
			at = len(out)
		}
		out = append(out, l)
	}
	if at < 0 {
		at = len(out)
	}
	return strings.Join(slices.Insert(out, at, add...), "")
}

// warnSettingsUnread says, once per tick per node, that a node's live settings could not be
// read (fsm.Snapshot.SettingsUnread): the settings planner skips such a node, and status.message
// says the same (settingsUnreadMessage).
func (r *ValkeyClusterReconciler) warnSettingsUnread(log *zap.Logger, vc *v1.ValkeyCluster, obs *observation) {
	for _, p := range obs.snapshot.SettingsUnread() {
		if r.ticks.due("config-get/"+clusterKey(vc)+"/"+p.Name, time.Now()) {
			log.Warn(logging.MsgSettingsUnreadable, logging.Pod(p.Name), zap.String(logging.FieldError, p.Node.ConfigErr))
			recordEvent(r.Events, vc, true, EventSettingsUnreadable, "Observe", "pod %s: live settings cannot be read: %s", p.Name, p.Node.ConfigErr)
		}
	}
}

// settingsRefusedFix is what status.message and the Event tell the user to do about a refused
// live value.
const settingsRefusedFix = "fix the value in the ValkeyConfig (the node keeps the value it runs)"

// changeKey names a SetConfig's change: its settings and the values they are set to, sorted.
func changeKey(set []liveconf.Change) string {
	parts := make([]string, len(set))
	for i, c := range set {
		parts[i] = c.Key + "=" + c.Want
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// liveAttempts is what the reconciler keeps between passes about the live settings it set and
// has not yet seen applied, per cluster ("namespace/name") and pod: the change last announced,
// so `applying settings live` is said once per node and change rather than once per retry, and
// Valkey's reply when it refused that change, so that status.message says it while it stands.
// It drives logging and status only, never a decision.
type liveAttempts struct {
	mu sync.Mutex
	m  map[string]map[string]liveAttempt
}

type liveAttempt struct {
	change  string
	refusal string
}

// announce reports whether change on pod is new (not said since it was last applied), and
// remembers it as said.
func (l *liveAttempts) announce(cluster, pod, change string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	pods := l.pods(cluster)
	if a, ok := pods[pod]; ok && a.change == change {
		return false
	}
	pods[pod] = liveAttempt{change: change}
	return true
}

// refused remembers Valkey's refusal of change on pod; it reports whether the refusal is new
// (another change, or another reply).
func (l *liveAttempts) refused(cluster, pod, change, reply string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	pods := l.pods(cluster)
	prev := pods[pod]
	pods[pod] = liveAttempt{change: change, refusal: reply}
	return prev.change != change || prev.refusal != reply
}

// pods is the cluster's attempts by pod, made when there is none. Called with l.mu held.
func (l *liveAttempts) pods(cluster string) map[string]liveAttempt {
	if l.m == nil {
		l.m = map[string]map[string]liveAttempt{}
	}
	if l.m[cluster] == nil {
		l.m[cluster] = map[string]liveAttempt{}
	}
	return l.m[cluster]
}

// applied forgets pod's attempt: its node runs the change.
func (l *liveAttempts) applied(cluster, pod string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m[cluster], pod)
}

// forget drops everything kept about a cluster.
func (l *liveAttempts) forget(cluster string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, cluster)
}

// standing keeps, of the cluster's attempts, those that pl still makes (a SetConfig of the same
// pod and change: the values were not fixed, and the node still does not run them), drops the
// others (the ValkeyConfig was fixed, the node runs the values, the pod is gone), and returns
// the message of the refusals that stand: "" when none does. So a fixed value clears
// status.message in the very pass that plans the fix.
func (l *liveAttempts) standing(cluster string, pl plan.Plan) string {
	planned := map[string]string{}
	for _, a := range pl.Actions {
		if a, ok := a.(plan.SetConfig); ok && len(a.Set) > 0 {
			planned[a.Pod] = changeKey(a.Set)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var pods []string
	for pod, a := range l.m[cluster] {
		if planned[pod] != a.change {
			delete(l.m[cluster], pod)
		} else if a.refusal != "" {
			pods = append(pods, pod)
		}
	}
	if len(pods) == 0 {
		return ""
	}
	slices.Sort(pods)
	first := l.m[cluster][pods[0]]
	who := "pod " + pods[0]
	if len(pods) > 1 {
		who += fmt.Sprintf(" (and %d more)", len(pods)-1)
	}
	return fmt.Sprintf("Valkey refused the live settings %s on %s: %s; %s", first.change, who, first.refusal, settingsRefusedFix)
}
