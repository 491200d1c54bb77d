package controllers

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
)

// pushToNodes is the skeleton the ACL and TLS controllers share to push to a cluster's nodes:
// every running pod of pods (fanout.Targets) that has not gone silent (nodeRetries.notSilent) is
// given push, concurrently (fanout.Each; a panic is logged and becomes failed's result), and the
// pool keeps the connections of exactly those targeted. behind is true when a pod was left out
// (starting, or silent): the push is owed to it, and the pass comes back sooner.
func pushToNodes[T any](ctx context.Context, log *zap.Logger, cluster string, pods []corev1.Pod, retries *nodeRetries, conns *valkey.Pool, now time.Time,
	push func(context.Context, fanout.Target) T, failed func(pod string, err error) T) (results []T, behind bool) {
	targets, behind := fanout.Targets(pods, resources.ClientPort, now)
	addrs := make([]string, len(targets))
	for i, t := range targets {
		addrs[i] = t.Addr
	}
	targets, skipped := retries.notSilent(cluster, targets, now)
	results = fanout.Each(ctx, targets, func(ctx context.Context, t fanout.Target) T {
		if ctx.Err() != nil { // the pass's budget is spent: a dial would not heed it
			return failed(t.Pod.Name, ctx.Err())
		}
		return push(ctx, t)
	}, func(t fanout.Target, p *logging.PanicError) T {
		logging.LogPanic(log, t.Pod.Name, p)
		return failed(t.Pod.Name, p)
	})
	conns.Retain(cluster, addrs)
	return results, behind || skipped
}
