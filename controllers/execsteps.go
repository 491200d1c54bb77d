package controllers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// The executor's methods for the steps on the nodes and on the pods' lives (execute.go's run):
// each carries out its action as planned and says so in the catalogue's words; none chooses.

// createPod creates a's node, unless the API server refused a pod earlier in the pass: a
// refusal is recorded, said at WARN and as an Event, and holds back the pass's other creations.
func (x *execution) createPod(ctx context.Context, a plan.CreatePod) (outcome, error) {
	if x.refused {
		return outcome{skipped: true}, nil
	}
	r, vc := x.r, x.vc
	cr, err := r.createNode(ctx, x.log, vc, x.rc, x.obs, a)
	switch {
	case cr != nil:
		x.refused = true
		wait := r.creates.failed(clusterKey(vc), vc.Generation, *cr, time.Now())
		logRefused(x.log, cr, wait)
		recordEvent(r.Events, vc, true, EventPodCreateRefused, "Create", "%s; retrying in %s", cr, wait.Round(time.Second))
	case err == nil:
		r.creates.succeeded(clusterKey(vc))
	}
	return outcome{}, err
}

// meet sends CLUSTER MEET. One `cluster meet issued` per node introduced: the mesh meets between
// nodes the seed already introduced only speed up gossip (DEBUG).
func (x *execution) meet(ctx context.Context, a plan.Meet) error {
	c, err := x.node(a.Pod)
	if err != nil {
		return err
	}
	msg, level := logging.MsgClusterMeetIssued, zap.InfoLevel
	if a.Mesh {
		msg, level = logging.MsgMeshMeetIssued, zap.DebugLevel
	}
	x.log.Log(level, msg, logging.Pod(a.Pod), logging.Node(a.NodeID), zap.String(logging.FieldIP, a.IP))
	return c.Meet(ctx, a.IP, resources.ClientPort, resources.BusPort)
}

// addSlots sends CLUSTER ADDSLOTSRANGE; slots served again after every copy was lost are said at
// WARN once served (a failed attempt is planned, and said, again by the next pass).
func (x *execution) addSlots(ctx context.Context, a plan.AddSlots) error {
	c, err := x.node(a.Pod)
	if err != nil {
		return err
	}
	x.log.Info(logging.MsgAssigningSlots, logging.Pod(a.Pod), zap.Int(logging.FieldSlots, a.Slots.Count()))
	if err = c.AddSlotsRange(ctx, a.Slots); err == nil && a.Lost {
		x.log.Warn(logging.MsgShardDataLost, zap.Int(logging.FieldShard, a.Shard), zap.String(logging.FieldSlots, a.Slots.String()))
	}
	return err
}

// replicate sends CLUSTER REPLICATE.
func (x *execution) replicate(ctx context.Context, a plan.Replicate) error {
	c, err := x.node(a.Pod)
	if err != nil {
		return err
	}
	x.log.Info(logging.MsgAttachingReplica, logging.Pod(a.Pod), logging.Node(a.PrimaryID))
	return c.Replicate(ctx, a.PrimaryID)
}

// takeover sends CLUSTER FAILOVER TAKEOVER, once the replica's current epoch passed a.AfterEpoch
// when set (plan/epoch.go).
func (x *execution) takeover(ctx context.Context, a plan.Takeover) error {
	c, err := x.node(a.Pod)
	if err != nil {
		return err
	}
	if a.AfterEpoch > 0 {
		awaitEpoch(ctx, c, a.AfterEpoch, EpochWait)
	}
	return takeOver(ctx, x.log, c, a)
}

// bumpEpoch sends CLUSTER BUMPEPOCH.
func (x *execution) bumpEpoch(ctx context.Context, a plan.BumpEpoch) error {
	c, err := x.node(a.Pod)
	if err != nil {
		return err
	}
	x.log.Info(logging.MsgBumpingEpoch, logging.Pod(a.Pod), zap.String(logging.FieldReason, a.Reason))
	_, _, err = c.BumpEpoch(ctx)
	return err
}

// failoverForce sends CLUSTER FAILOVER FORCE and, when the replica does not become primary
// within plan.FailoverCheck, takes over instead: its next election is barred for 4 ×
// cluster-node-timeout, and the primary's container is gone (plan.FailoverForce). What was done
// is then the takeover.
func (x *execution) failoverForce(ctx context.Context, a plan.FailoverForce) (outcome, error) {
	c, err := x.node(a.Pod)
	if err != nil {
		return outcome{}, err
	}
	if err := c.Failover(ctx, valkey.FailoverForce); err != nil {
		return outcome{}, err
	}
	x.log.Info(failoverMessage(a), logging.Pod(a.Pod), logging.Node(a.PrimaryID), zap.Int(logging.FieldShard, a.Shard))
	if becamePrimary(ctx, c, plan.FailoverCheck) {
		return outcome{}, nil
	}
	t := plan.Takeover{Pod: a.Pod, PrimaryID: a.PrimaryID, Shard: a.Shard, Reason: plan.TakeoverForceRefused}
	return outcome{became: t}, takeOver(ctx, x.log, c, t)
}

// failover sends a graceful CLUSTER FAILOVER. A replica that is a primary already was promoted
// since the pass observed it (Valkey 9's own failover on SIGTERM, or Valkey's failure detection):
// the handover asked for is done, and nothing is counted.
func (x *execution) failover(ctx context.Context, a plan.Failover) (outcome, error) {
	c, err := x.node(a.Pod)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{}
	err = c.Failover(ctx, valkey.FailoverCoordinated)
	if alreadyPrimary(err) {
		err, out.unrecorded = nil, true
	}
	if err != nil {
		return out, err
	}
	for _, p := range x.obs.snapshot.Pods {
		if p.Node != nil && p.Node.ID == a.PrimaryID {
			x.r.served.handedOver(clusterKey(x.vc), p.Name, time.Now())
		}
	}
	if !out.unrecorded {
		fields := []zap.Field{logging.Pod(a.Pod), logging.Node(a.PrimaryID), zap.Int(logging.FieldShard, a.Shard)}
		if a.Purpose == plan.Spread {
			fields = append(fields, zap.String(logging.FieldZone, a.Zone))
		}
		x.log.Info(failoverMessage(a), fields...)
	}
	return out, nil
}

// forget has every node that knows the id forget it in this one step (forgets are not
// gossiped). One line per id, not per node told: a 6-node roll logged 180 of them.
func (x *execution) forget(ctx context.Context, a plan.Forget) error {
	x.log.Info(logging.MsgForgettingNode, logging.Node(a.NodeID), zap.Int(logging.FieldNodes, len(a.Pods)))
	for _, pod := range a.Pods {
		c, err := x.node(pod)
		if err != nil {
			return err
		}
		if err := c.Forget(ctx, a.NodeID); err != nil {
			return err
		}
	}
	return nil
}

// moveSlots moves slots (valkey/mover), counting what moved, and notes each source as handed
// over.
func (x *execution) moveSlots(ctx context.Context, a plan.MoveSlots) error {
	r, vc := x.r, x.vc
	moved, err := r.slotMover(x.obs, x.node, x.creds, x.migrate).Move(ctx, x.log, a)
	r.Metrics.SlotsMoved(vc.Namespace, vc.Name, moved.Slots, moved.Keys)
	for _, m := range a.Moves {
		r.served.handedOver(clusterKey(vc), m.Source, time.Now())
	}
	return err
}

// detach marks a's node Leaving, then stops its replication.
func (x *execution) detach(ctx context.Context, a plan.Detach) error {
	if err := x.r.markLeaving(ctx, x.obs, a.Pod); err != nil {
		return err
	}
	x.r.detachReplica(ctx, x.log, x.obs, x.node, a.Pod)
	return nil
}

// deletePod retires a's node: Leaving first (a replica detached by an operator that then stops
// is retired by the next one, rule 1b, never left detached for good), detached, then deleted. A
// zone move that found no room holds the next moves back.
func (x *execution) deletePod(ctx context.Context, a plan.DeletePod) error {
	r, obs := x.r, x.obs
	if err := r.markLeaving(ctx, obs, a.Pod); err != nil {
		return err
	}
	r.detachReplica(ctx, x.log, obs, x.node, a.Pod)
	if err := r.retireNode(ctx, x.log, obs, a.Pod, a.Reason); err != nil {
		return err
	}
	if a.Reason == plan.RetireNoRoom {
		why := fmt.Sprintf("pod %s could not be scheduled in the zone it was to move to", a.Pod)
		for _, p := range obs.snapshot.Pods {
			if p.Name == a.Pod && p.Unschedulable != "" {
				why += ": " + p.Unschedulable
			}
		}
		r.moves.hold(clusterKey(x.vc), why, time.Now())
	}
	return nil
}
