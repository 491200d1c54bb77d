package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/valkey"
)

// setConfig carries out a plan.SetConfig: one CONFIG SET of the settings on the node, one
// CONFIG GET to verify that the node runs them as Valkey reads them back, then the node's
// record (its ConfigMap, then its ValkeyNode) takes the desired live settings, so that a reader
// of the record, and the next pass, see what runs. A value Valkey refuses is returned with its
// reply: the pass's `reconcile error, requeuing` says it, and the rate limiter retries it; the
// node is never replaced for it.
func (r *ValkeyClusterReconciler) setConfig(ctx context.Context, log *zap.Logger, obs *observation, node func(string) (*valkey.Client, error), a plan.SetConfig) error {
	if len(a.Set) > 0 {
		c, err := node(a.Pod)
		if err != nil {
			return err
		}
		var changed []string
		params := map[string]string{}
		for _, ch := range a.Set {
			params[ch.Key] = ch.Want
			if slices.Contains(a.Drift, ch.Key) {
				log.Warn(logging.MsgSettingDrifted, logging.Pod(a.Pod), zap.String(logging.FieldSetting, ch.Key),
					zap.String(logging.FieldValue, ch.Have), zap.String(logging.FieldWant, ch.Want))
			} else {
				changed = append(changed, ch.Key)
			}
		}
		if len(changed) > 0 {
			log.Info(logging.MsgApplyingSettingsLive, logging.Pod(a.Pod), zap.String(logging.FieldSettings, strings.Join(changed, ",")))
		}
		if err := c.ConfigSet(ctx, params); err != nil {
			return err
		}
		got, err := c.ConfigGet(ctx, slices.Sorted(maps.Keys(params))...)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(params)) {
			if !liveconf.Equal(k, params[k], got[k]) {
				return fmt.Errorf("%s reads back %q after CONFIG SET %q", k, got[k], params[k])
			}
		}
	}
	return r.recordLiveSettings(ctx, obs, a.Pod)
}

// recordLiveSettings makes the record of the node of pod say that it runs the desired live
// settings: its {node}-config ConfigMap's valkey.conf first, then its ValkeyNode's
// spec.valkeySettings (the admission rule lets only the live settings change). The ValkeyNode
// goes last: once it agrees, the planner has nothing left to do for the node, so an operator
// that stops between the two writes finishes both on a later pass.
func (r *ValkeyClusterReconciler) recordLiveSettings(ctx context.Context, obs *observation, pod string) error {
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
	default:
		if conf := withLiveSettings(cm.Data[configFileName], live); conf != cm.Data[configFileName] {
			cm.Data[configFileName] = conf
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
