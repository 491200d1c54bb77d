package failover

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// HandoverAttempts bounds the kills TestKillRightAfterHandover makes while waiting for the race it
// is about: on Valkey 8.0.1 about one kill in three, 0.3–1 s after a handover, finds a voting
// primary that has not heard of it yet (measured on loopback).
const HandoverAttempts = 3

// TestKillRightAfterHandover: chaos seed 60606 (tls, +08:08). A graceful CLUSTER FAILOVER, the
// one the spread over zones and a roll send, makes shard 0's replica its primary; the new
// primary is SIGKILLed as soon as the two nodes' own views show the handover. The old primary,
// now its replica, holds the shard's data, but the other primaries hear of its new role only
// with its next heartbeat: a CLUSTER FAILOVER FORCE on it then is refused, and a refused
// election bars its next one, Valkey's own failover included, for 4 x cluster-node-timeout.
// Before the fix the operator re-issued the FORCE every 10 s and the shard refused writes for
// 20.6 s. Now it takes over (TAKEOVER, the lost primary's container being gone) when the voting
// primaries' views say a FORCE would be refused, or when a FORCE has not taken within half a
// second: it never promotes the shard twice, and the old primary serves the shard again.
//
// The kill is repeated (HandoverAttempts) until the race happens: the operator took over, or a
// voting primary's log says it refused the FORCE. Every acknowledged write is read back.
func TestKillRightAfterHandover(t *testing.T) {
	const ns = "kill-handover"
	vc := harness.ActiveCluster(t, ns, 3, 1)
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	harness.WaitPrimariesSpread(t, vc)
	w, opts := harness.StartClusterWriter(t, vc)
	creds := func([]corev1.Pod) valkey.Credentials { return harness.Creds(t, vc) }
	shard0 := slot.Set{slot.EvenSpread(3)[0]}
	raced := false
	for attempt := 1; attempt <= HandoverAttempts && !raced; attempt++ {
		harness.WaitReady(t, vc, 3, 1, nil, harness.HealTimeout)
		old, err := harness.ShardPod(t.Context(), vc, creds, 0, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		replica, err := harness.ShardPod(t.Context(), vc, creds, 0, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		deadID := nodeID(t, vc, replica)
		logBefore := len(harness.Op.Logs())
		if err := harness.Handover(t.Context(), replica, old, harness.Creds(t, vc)); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := harness.Cluster.Kubelet.KillPod(ns, replica.Name); err != nil {
			t.Fatal(err)
		}
		stale := staleVoters(t, vc, old, replica.Name)
		harness.WaitFor(t, fmt.Sprintf("%s serving shard 0 again", old.Name), harness.HealTimeout, func() string {
			primary, _, err := harness.NodeRole(t.Context(), old, harness.Creds(t, vc))
			return harness.Problemf(err, "ask %s", old.Name) + map[bool]string{true: "", false: old.Name + " is a replica"}[primary || err != nil]
		})
		served := time.Now()
		harness.WaitReady(t, vc, 3, 1, map[string]bool{replica.Name: true}, harness.HealTimeout)
		lines := harness.ParseLog(t, harness.Op.Logs()[logBefore:])
		var promotions []string
		tookOver := false
		for _, l := range lines {
			if l.Fields[logging.FieldNode] != deadID {
				continue
			}
			switch l.Message() {
			case logging.MsgPrimaryGonePromoting, logging.MsgPrimaryGoneTakeover, logging.MsgNoQuorumTakeover:
				promotions = append(promotions, fmt.Sprintf("%s %s (%v)", l.Timestamp, l.Message(), l.Fields[logging.FieldReason]))
				tookOver = tookOver || l.Message() == logging.MsgPrimaryGoneTakeover
			}
		}
		refused := deniedVote(t, vc, old)
		raced = tookOver || refused
		t.Logf("attempt %d: killed %s right after the handover; voters that still saw %s as a primary: %v; a FORCE refused in a voter's log: %v; shard 0 served by %s %s after the kill; longest refusal on shard 0 %s; promotions: %s",
			attempt, replica.Name, old.Name, stale, refused, old.Name, served.Sub(killed).Round(time.Millisecond),
			longestOn(w.Refusals(), shard0, killed).Round(time.Millisecond), strings.Join(promotions, "; "))
		// The fix's claim: one promotion, answered at once when it cannot take, never a second
		// one a look later.
		fails := 0
		for _, l := range lines {
			if l.Fields[logging.FieldNode] == deadID && l.Message() == logging.MsgPrimaryGonePromoting {
				fails++
			}
		}
		if fails > 1 {
			t.Errorf("attempt %d: %d FORCEs for the lost primary %s: a refused one was retried instead of taken over", attempt, fails, deadID)
		}
		if len(promotions) > 2 {
			t.Errorf("attempt %d: %d promotions of shard 0: %v", attempt, len(promotions), promotions)
		}
	}
	if !raced {
		t.Logf("in %d kills no voting primary refused the FORCE and the operator never had to take over: the race did not happen this run", HandoverAttempts)
	}
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	t.Log(r.String())
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
}

// nodeID is the Valkey node id of p.
func nodeID(t *testing.T, vc *v1.ValkeyCluster, p corev1.Pod) string {
	t.Helper()
	c, err := valkey.NewClient(harness.PodAddr(p), harness.Creds(t, vc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.MyID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// staleVoters are the other shards' primaries whose view still shows old as a primary.
func staleVoters(t *testing.T, vc *v1.ValkeyCluster, old corev1.Pod, dead string) []string {
	t.Helper()
	oldID := nodeID(t, vc, old)
	var out []string
	for _, p := range harness.Pods(t, vc) {
		if p.Name == old.Name || p.Name == dead {
			continue
		}
		c, err := valkey.NewClient(harness.PodAddr(p), harness.Creds(t, vc))
		if err != nil {
			continue
		}
		entries, err := c.ClusterNodes(t.Context())
		c.Close()
		if err != nil {
			continue
		}
		me, _ := valkey.Myself(entries)
		if me.Role != valkey.RolePrimary || len(me.Slots) == 0 {
			continue
		}
		for _, e := range entries {
			if e.ID == oldID && e.Role == valkey.RolePrimary {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// deniedVote reports whether a pod's Valkey log says it refused old a vote (the FORCE did not
// take).
func deniedVote(t *testing.T, vc *v1.ValkeyCluster, old corev1.Pod) bool {
	t.Helper()
	id := nodeID(t, vc, old)
	for _, p := range harness.Pods(t, vc) {
		path, err := harness.Cluster.Kubelet.LogPath(vc.Namespace, p.Name, "valkey")
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte("Failover auth denied to "+id)) {
			return true
		}
	}
	return false
}

// longestOn is the longest refusal on one of slots that began after since (less the writer's
// half second of lag).
func longestOn(rs []harness.Refusal, slots slot.Set, since time.Time) time.Duration {
	var d time.Duration
	for _, r := range rs {
		if slots.Contains(r.Slot) && !r.Start.Before(since.Add(-500*time.Millisecond)) {
			d = max(d, r.End.Sub(r.Start))
		}
	}
	return d
}

// TestKilledPrimaryWithoutFullCoverage: a cluster whose ValkeyConfig sets
// cluster-require-full-coverage no (Valkey's default, and the original's, is yes). A primary is
// SIGKILLed under the writer: the operator promotes its replica as under yes, the cluster is
// Ready again with every acknowledged key read back, and, the point of no, the other shards'
// slots refuse no write meanwhile (under yes every slot refuses, CLUSTERDOWN, from the moment
// the dead primary is flagged failed until its replica serves: docs/user/failure-handling.md).
func TestKilledPrimaryWithoutFullCoverage(t *testing.T) {
	const ns = "no-full-coverage"
	harness.SetupNamespace(t, ns)
	img, cfg := harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image")
	cfg.Spec.Valkey["cluster-require-full-coverage"] = "no"
	harness.Create(t, img, cfg)
	vc := harness.NewCluster(ns, "vc", ns+"-config")
	harness.Create(t, vc)
	vc, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateActive, harness.FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, nil, harness.FormTimeout)
	if got := harness.ConfigGet(t, harness.Pods(t, vc)[0], "cluster-require-full-coverage"); got != "no" {
		t.Fatalf("cluster-require-full-coverage is %q on the nodes, want no", got)
	}
	w, opts := harness.StartClusterWriter(t, vc)
	creds := func([]corev1.Pod) valkey.Credentials { return harness.Creds(t, vc) }
	victim, err := harness.ShardPod(t.Context(), vc, creds, 0, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := harness.Cluster.Kubelet.KillPod(ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, map[string]bool{victim.Name: true}, harness.HealTimeout)
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}
	r := harness.FinishWriter(t, w, vc, opts)
	t.Log(r.String())
	shard0 := slot.Set{slot.EvenSpread(3)[0]}
	var others []string
	for _, x := range r.Refusals {
		// A write that went unanswered within the writer's second is latency on a loaded
		// machine, not a refusal.
		latency := strings.Contains(x.LastErr, "deadline exceeded") || strings.Contains(x.LastErr, "i/o timeout")
		if !shard0.Contains(x.Slot) && !x.Start.Before(killed) && !latency {
			others = append(others, fmt.Sprintf("slot %d for %s (%s)", x.Slot, x.End.Sub(x.Start).Round(time.Millisecond), x.LastErr))
		}
	}
	if len(others) > 0 {
		t.Errorf("slots of the shards still up refused writes without full coverage: %s", strings.Join(others, "; "))
	}
	t.Logf("shard 0's longest refusal %s", longestOn(r.Refusals, shard0, killed).Round(time.Millisecond))
	harness.VerifyValkey(t, harness.CurrentCluster(t, vc), 3, 1)
}
