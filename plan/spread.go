package plan

// The spread planner (placement) keeps a healthy cluster's copies spread over its zones, so that
// losing one zone costs no shard its data and leaves a majority of primaries to fail its lost
// primaries over by themselves (no TAKEOVER) wherever a spread can: with three zones and one
// replica per shard, for 2, 3, 5 and 6 shards, not for 1 or 4. The scheduler places pods as they
// are created (a per-shard zone spread, a cluster-wide preference); this planner corrects what it
// could not (a zone that was down when the pods were created, primaries that Valkey's own
// failovers gathered in one zone). Its rules, in order:
//
//  1. Gate: nothing is done unless every concern before it is content: the cluster was formed
//     once and is formed and in agreement now, Ready for SpreadSettle at least (a cluster just
//     healed is left to settle: a second fault often follows the first, and a move right after
//     a heal would meet it half done), every replica is synced and every node answers,
//     every shard has exactly its pods, all of the current spec, Active and bound to a node of
//     a known zone, no failover is awaited, every node's view of who is whose replica agrees
//     with the nodes' own (Snapshot.RolesDisagree: after a handover, until the other primaries
//     have heard of it, the old primary could not be promoted by their vote if the new one
//     died, so the next handover waits), and at least two of the cluster's zones take pods
//     (Snapshot.ZonesUp). A cluster that is not healthy is healed first; a zone that is down is
//     not a place to move to.
//  2. Primaries: with Z zones up and S shards, no zone holds more than ceil(S/Z) primaries. For
//     the zone holding most (then the first by name) above that cap, the first of its primaries
//     by shard that has a caught-up Active replica in a zone below the cap (the zone with fewest
//     primaries, then the first by name; then the largest offset: bestReplica, forSpread) is handed over by one graceful
//     CLUSTER FAILOVER, the failover a rolling upgrade uses: the replica is caught up and Valkey
//     pauses the primary's writes until the replica has all of them, so no acknowledged write is
//     lost. Its intent is persisted (status.failover) and the pass waits FailoverRetry for it.
//  3. Copies: when rule 2 finds no replica to hand over to, or a shard has two copies in one zone
//     while a zone up holds none of its copies, or the zones up hold numbers of the cluster's
//     pods two or more apart, one new copy of one shard is created pinned to the zone that
//     wants it (CreatePod.Zone), naming the zone of the copy it replaces (MovedFrom). The
//     upgrade planner waits for it to catch up and then retires the shard's replica in that zone,
//     as a roll replaces a node: the shard never has fewer caught-up copies than wanted. A new
//     copy that the scheduler cannot place is retired (no room in that zone), and no copy is
//     moved for a while (Snapshot.ZoneMoveHeld); nor while the back-off after a refused pod
//     creation runs (Snapshot.CreateHeld: a full quota would refuse every move). In order:
//     a. a shard with two copies in one zone: to the zone up without one of its copies holding
//     fewest of the cluster's pods (then by name), from the shared zone;
//     b. the zone above the primaries' cap: for its primaries by shard, to the zone below the
//     cap with fewest primaries (then by name) holding no copy of the shard, from the zone of
//     the shard's replica holding most of the cluster's pods; rule 2 then hands the primary over;
//     c. uneven zones: from the zone up with most pods to the one with fewest, the first shard by
//     index with a replica in the first and no copy in the second.
//     Each move lowers either the primaries above their cap, the shards with a shared zone or
//     the spread of pod counts, and none raises one already at its best, so moves end.
//
// A primary is never moved by deleting a pod, and a zone's last copy of a shard never leaves it
// before its replacement has caught up elsewhere.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

var spread = Planner{Name: "spread", Plan: planSpread}

// healthyForSpread is rule 1's condition: the shards' pods, when the planner may act.
func healthyForSpread(s fsm.Snapshot) ([][]fsm.Pod, bool) {
	if len(s.ZonesUp) < 2 || s.SpecHash == "" || !s.Formed() || !s.Synced() || s.AllAnswer() != "" || s.RolesDisagree() != "" {
		return nil, false
	}
	shardPods := s.ShardPods()
	for _, pods := range shardPods {
		if len(pods) != s.ReplicasPerShard+1 {
			return nil, false
		}
		for _, p := range pods {
			if s.Replaced(p) || p.Lifecycle != string(v1.LifecycleActive) || p.Zone == "" || p.MovedFrom != "" {
				return nil, false
			}
		}
	}
	for _, p := range s.Pods {
		if p.Deleting || p.Lost() {
			return nil, false
		}
	}
	return shardPods, true
}

// SpreadSettle is how long a cluster stays Ready before the spread planner acts on it.
const SpreadSettle = 30 * time.Second

func planSpread(in Input) Step {
	s := in.Snapshot
	if !formedOnce(in) || s.ReadySince.IsZero() || s.Now.Sub(s.ReadySince) < SpreadSettle {
		return Step{}
	}
	shardPods, ok := healthyForSpread(s)
	if !ok {
		return Step{}
	}
	if f := s.Failover; f != nil && s.Now.Sub(f.StartedAt) < FailoverRetry {
		return Step{}
	}
	z := newZoneCount(s, shardPods)
	over, cap := z.overCap()
	if over != "" {
		if a, ok := z.handOver(over, cap); ok {
			return Step{Actions: []Action{a}, Wait: fmt.Sprintf("shard %d: waiting for the failover to %s", a.Shard, a.Pod)}
		}
	}
	if s.ZoneMoveHeld != "" {
		return Step{Hold: s.ZoneMoveHeld}
	}
	if s.CreateHeld {
		return Step{Hold: s.CreateRefused} // the pods planner's rule 5: no pod is created
	}
	if c, ok := z.moveShared(); ok {
		return Step{Actions: []Action{c}, Wait: fmt.Sprintf("shard %d: waiting for its copy in zone %s to join", c.Shard, c.Zone)}
	}
	if over != "" {
		if c, ok := z.moveForPrimary(over, cap); ok {
			return Step{Actions: []Action{c}, Wait: fmt.Sprintf("shard %d: waiting for its copy in zone %s to join", c.Shard, c.Zone)}
		}
	}
	if c, ok := z.moveUneven(); ok {
		return Step{Actions: []Action{c}, Wait: fmt.Sprintf("shard %d: waiting for its copy in zone %s to join", c.Shard, c.Zone)}
	}
	return Step{}
}

// zoneCount is the spread of a healthy cluster over its zones up.
type zoneCount struct {
	up        []string
	shardPods [][]fsm.Pod
	primary   []*fsm.Pod     // by shard
	primaries map[string]int // by zone
	pods      map[string]int // by zone
}

func newZoneCount(s fsm.Snapshot, shardPods [][]fsm.Pod) zoneCount {
	z := zoneCount{up: s.ZonesUp, shardPods: shardPods, primaries: primaryZones(shardPods, -1), pods: map[string]int{}}
	for _, pods := range shardPods {
		z.primary = append(z.primary, fsm.ShardPrimary(pods))
		for _, q := range pods {
			z.pods[q.Zone]++
		}
	}
	return z
}

// overCap returns the zone holding most primaries above ceil(shards / zones up) (then the first
// by name), "" when none, and the cap. A zone that merely takes no new pods now (a cordon, a
// node under memory pressure) is not emptied of its primaries: its running nodes are healthy,
// and a taint that comes and goes would hand primaries back and forth.
func (z zoneCount) overCap() (string, int) {
	cap := (len(z.shardPods) + len(z.up) - 1) / len(z.up)
	over, most := "", 0
	for _, zone := range slices.Sorted(maps.Keys(z.primaries)) {
		n := z.primaries[zone]
		if n > cap && n > most {
			over, most = zone, n
		}
	}
	return over, cap
}

// handOver applies rule 2 to zone over.
func (z zoneCount) handOver(over string, cap int) (Failover, bool) {
	for shard, p := range z.primary {
		if p == nil || p.Zone != over {
			continue
		}
		if best := bestReplica(z.shardPods[shard], choice{purpose: forSpread, primaryID: p.Node.ID, primary: p, primaries: z.primaries, up: z.up, cap: cap}); best != nil {
			return Failover{Pod: best.Name, PrimaryID: p.Node.ID, Shard: shard, Purpose: Spread, Zone: over}, true
		}
	}
	return Failover{}, false
}

// copiesIn counts shard's copies in zone.
func (z zoneCount) copiesIn(shard int, zone string) int {
	n := 0
	for _, p := range z.shardPods[shard] {
		if p.Zone == zone {
			n++
		}
	}
	return n
}

// fewestPods is the zone up among candidates holding fewest of the cluster's pods, then the first
// by name; "" when there is none.
func (z zoneCount) fewestPods(ok func(zone string) bool) string {
	best := ""
	for _, zone := range z.up { // sorted
		if ok(zone) && (best == "" || z.pods[zone] < z.pods[best]) {
			best = zone
		}
	}
	return best
}

// moveShared applies rule 3a.
func (z zoneCount) moveShared() (CreatePod, bool) {
	for shard := range z.shardPods {
		for _, zone := range slices.Sorted(maps.Keys(z.zonesOf(shard))) {
			if z.copiesIn(shard, zone) < 2 {
				continue
			}
			to := z.fewestPods(func(c string) bool { return z.copiesIn(shard, c) == 0 })
			if to != "" {
				return CreatePod{Shard: shard, Zone: to, MovedFrom: zone}, true
			}
		}
	}
	return CreatePod{}, false
}

// moveForPrimary applies rule 3b to zone over.
func (z zoneCount) moveForPrimary(over string, cap int) (CreatePod, bool) {
	for shard, p := range z.primary {
		if p == nil || p.Zone != over {
			continue
		}
		to := ""
		for _, zone := range z.up {
			if z.primaries[zone] < cap && z.copiesIn(shard, zone) == 0 && (to == "" || z.primaries[zone] < z.primaries[to]) {
				to = zone
			}
		}
		if to == "" {
			continue
		}
		from := ""
		for _, r := range z.shardPods[shard] {
			if r.Name != p.Name && (from == "" || z.pods[r.Zone] > z.pods[from]) {
				from = r.Zone
			}
		}
		if from != "" {
			return CreatePod{Shard: shard, Zone: to, MovedFrom: from}, true
		}
	}
	return CreatePod{}, false
}

// moveUneven applies rule 3c.
func (z zoneCount) moveUneven() (CreatePod, bool) {
	most, least := "", ""
	for _, zone := range z.up {
		if most == "" || z.pods[zone] > z.pods[most] {
			most = zone
		}
		if least == "" || z.pods[zone] < z.pods[least] {
			least = zone
		}
	}
	if z.pods[most]-z.pods[least] < 2 {
		return CreatePod{}, false
	}
	for shard, pods := range z.shardPods {
		if z.copiesIn(shard, least) > 0 {
			continue
		}
		for _, r := range pods {
			if r.Zone == most && (z.primary[shard] == nil || r.Name != z.primary[shard].Name) {
				return CreatePod{Shard: shard, Zone: least, MovedFrom: most}, true
			}
		}
	}
	return CreatePod{}, false
}

func (z zoneCount) zonesOf(shard int) map[string]int {
	m := map[string]int{}
	for _, p := range z.shardPods[shard] {
		m[p.Zone]++
	}
	return m
}

// avoidZones are the zones of a shard's live copies (live, fsm.Snapshot.ShardPods), when one of
// the cluster's zones holds none of them (CreatePod.Avoid): a new copy of the shard then goes
// where the shard has no copy. A lost copy's zone is not avoided: when it is the only zone
// without a live copy, the new copy waits for it (under zoneSpread required) rather than join a
// surviving copy's zone.
func avoidZones(zones []string, live []fsm.Pod) string {
	if len(zones) < 2 {
		return ""
	}
	var avoid []string
	for _, p := range live {
		if p.Zone != "" && !slices.Contains(avoid, p.Zone) {
			avoid = append(avoid, p.Zone)
		}
	}
	if len(avoid) == 0 {
		return ""
	}
	for _, zone := range zones {
		if !slices.Contains(avoid, zone) {
			slices.Sort(avoid)
			return strings.Join(avoid, ",")
		}
	}
	return ""
}
