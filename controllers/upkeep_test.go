package controllers

import (
	"context"
	"testing"

	"go.uber.org/zap"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/valkey"
)

// upkeepPass plans the bookkeeping planners alone on obs.snapshot (plan.Before and plan.After,
// no chain steps) and carries them out with the executor, as a pass does.
func upkeepPass(t *testing.T, r *ValkeyClusterReconciler, log *zap.Logger, vc *v1.ValkeyCluster, obs *observation, planned ...plan.Action) error {
	t.Helper()
	in := plan.Input{State: fsm.Active, Snapshot: obs.snapshot, Planned: planned}
	var pl plan.Plan
	pl.Actions = append(pl.Actions, plan.Before().Run(in).Actions...)
	pl.Actions = append(pl.Actions, planned...)
	pl.Actions = append(pl.Actions, plan.After().Run(in).Actions...)
	return r.execute(context.Background(), log, vc, nil, valkey.Credentials{}, valkey.Credentials{}, obs, pl)
}
