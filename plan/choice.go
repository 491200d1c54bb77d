package plan

import (
	"cmp"
	"slices"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The replica-choice rule: which replica of a primary takes its place. Five planners promote a
// replica, and what makes one fit differs with why: a lost primary leaves nothing to compare a
// copy with, a graceful handover has a primary to catch up with, a roll and a spread also care
// where the new primary runs. One table says which preference applies to which purpose: R is a
// requirement (a candidate that fails it is never chosen), 1, 2, 3, 4 are the tie-breakers in
// the order they decide, - is not applied. The rows are choiceRules, in this order.
//
//	preference                      failover takeover misplaced upgrade spread
//	1  replica of the primary          R        R        R         R      R
//	2  labelled with the shard         -        -        R         -      -
//	3  Active                          R        -        -         R      -
//	4  not Leaving                     R        R        -         R      -
//	5  synced (offset above 0)         R        R        -         -      -
//	6  caught up with the primary      -        -        R         R      R
//	7  in a zone up                    -        -        -         -      R
//	8  in a zone below the cap         -        -        -         -      R
//	9  zone with fewest primaries      -        -        -         1      1
//	10 zone first by name              -        -        -         -      2
//	11 largest replication offset      1        1        1         2      3
//	12 first by name                   2        2        2         3      4
//
// Why, row by row:
//
//  1. Only a replica of the primary holds a copy of its slots. The row reads the replica's own
//     view, reachable or not: the failover and takeover planners pass reachable pods only, and
//     row 6 requires the answer where it matters.
//  2. A realign gives a shard's slots back to a node labelled with it (misplaced rule 2); the
//     others take the primary's replica wherever its label puts it: a lost primary's best copy
//     is the one to keep (the misplaced planner realigns it later), and the roll and the spread
//     pass their shard's pods only.
//  3. A failover promotes no Joining replica: its ValkeyNode turns Active only once its sync
//     was loaded, and a lost primary leaves nothing else to tell a usable copy by. A roll asks
//     the same of its target (its preflight waits for the shard's replicas to be Active). A
//     takeover, on quorum loss, takes any copy rather than none; a realign and a spread hand a
//     primary that answers over to a replica caught up with it (row 6), which says the copy is
//     there.
//  4. A Leaving replica was detached from its primary on its way out: its copy stopped at the
//     detach, and TAKEOVER would ignore the no-failover it was given. Row 3 implies it where it
//     applies. A realign and a spread do not apply it: they require row 6, and a detached
//     replica's link to its primary is down (valkey.Client.Detach), so it is not caught up.
//  5. With the primary gone (failover, takeover) there is no offset to compare with: a replica
//     at offset 0 never loaded a sync and holds nothing. Row 6 says more where it applies.
//  6. A graceful handover (realign, roll, spread) waits for the replica to catch up; one far
//     behind, or with its link down, or in a full sync, would stall it. fsm.CaughtUp.
//  7. The spread moves primaries out of a zone holding too many; a zone that takes no new pods
//     now is not one to move a primary into.
//  8. Nor one that the handover itself would put over the cap: the next pass would hand the
//     primary back.
//  9. A roll puts its new primary where the fewest primaries run, so that the spread planner
//     need not hand it over again once the roll ends; the spread's own aim.
//  10. The spread breaks a tie between zones by name, so that a zone's primaries move to the
//     same zone pass after pass; a roll lets the offset decide (row 11).
//  11. The copy with the most of the stream loses the fewest writes, and catches up first.
//  12. The same snapshot picks the same pod on every pass, and on every operator.
type purpose string

// The purposes a replica is chosen for, one per planner that promotes one.
const (
	forFailover  purpose = "failover"  // a lost primary (failover.go rule 5)
	forTakeover  purpose = "takeover"  // quorum loss (quorum.go)
	forMisplaced purpose = "misplaced" // a realign (misplaced.go rule 2)
	forUpgrade   purpose = "upgrade"   // a roll's handover (upgrade.go rule 6c)
	forSpread    purpose = "spread"    // a primary moved out of a zone (spread.go)
)

// choice is what a choice is made for: the purpose, the primary whose replica takes over, and
// what the purpose's rows read.
type choice struct {
	purpose purpose
	// primaryID is the primary's node id. primary is its pod, when it answers (row 6); nil for
	// a lost one.
	primaryID string
	primary   *fsm.Pod
	// shard is the label a realign asks for (row 2).
	shard int
	// primaries counts the other shards' primaries by zone (rows 8, 9); up are the zones up
	// (row 7) and cap the most primaries a zone may hold (row 8).
	primaries map[string]int
	up        []string
	cap       int
}

// use is how a row applies to a purpose: not, as a requirement, or as a tie-breaker (the rows
// that break ties decide in table order).
type use int

const (
	unused use = iota
	required
	preferred
)

// choiceRule is one row of the table: for a requirement, whether a candidate passes; for a
// tie-breaker, how two candidates compare (negative when a is better).
type choiceRule struct {
	name string
	uses map[purpose]use
	keep func(c choice, p fsm.Pod) bool
	cmp  func(c choice, a, b fsm.Pod) int
}

// every marks a row used the same way by every purpose.
func every(u use) map[purpose]use {
	return map[purpose]use{forFailover: u, forTakeover: u, forMisplaced: u, forUpgrade: u, forSpread: u}
}

// choiceRules is the table, in its order.
var choiceRules = []choiceRule{
	{name: "replica of the primary", uses: every(required), keep: func(c choice, p fsm.Pod) bool {
		return p.Node != nil && !p.Node.Primary && p.Node.PrimaryID == c.primaryID
	}},
	{name: "labelled with the shard", uses: map[purpose]use{forMisplaced: required}, keep: func(c choice, p fsm.Pod) bool {
		return p.Shard == c.shard
	}},
	{name: "Active", uses: map[purpose]use{forFailover: required, forUpgrade: required}, keep: func(_ choice, p fsm.Pod) bool {
		return p.Lifecycle == string(v1.LifecycleActive)
	}},
	{name: "not Leaving", uses: map[purpose]use{forFailover: required, forTakeover: required, forUpgrade: required}, keep: func(_ choice, p fsm.Pod) bool {
		return p.Lifecycle != string(v1.LifecycleLeaving)
	}},
	{name: "synced (offset above 0)", uses: map[purpose]use{forFailover: required, forTakeover: required}, keep: func(_ choice, p fsm.Pod) bool {
		return p.Node.ReplOffset > 0
	}},
	{name: "caught up with the primary", uses: map[purpose]use{forMisplaced: required, forUpgrade: required, forSpread: required}, keep: func(c choice, p fsm.Pod) bool {
		return c.primary != nil && fsm.CaughtUp(p, *c.primary)
	}},
	{name: "in a zone up", uses: map[purpose]use{forSpread: required}, keep: func(c choice, p fsm.Pod) bool {
		return slices.Contains(c.up, p.Zone)
	}},
	{name: "in a zone below the cap", uses: map[purpose]use{forSpread: required}, keep: func(c choice, p fsm.Pod) bool {
		return c.primaries[p.Zone] < c.cap
	}},
	{name: "zone with fewest primaries", uses: map[purpose]use{forUpgrade: preferred, forSpread: preferred}, cmp: func(c choice, a, b fsm.Pod) int {
		return cmp.Compare(c.primaries[a.Zone], c.primaries[b.Zone])
	}},
	{name: "zone first by name", uses: map[purpose]use{forSpread: preferred}, cmp: func(_ choice, a, b fsm.Pod) int {
		return cmp.Compare(a.Zone, b.Zone)
	}},
	{name: "largest replication offset", uses: every(preferred), cmp: func(_ choice, a, b fsm.Pod) int {
		return cmp.Compare(b.Node.ReplOffset, a.Node.ReplOffset)
	}},
	{name: "first by name", uses: every(preferred), cmp: func(_ choice, a, b fsm.Pod) int {
		return cmp.Compare(a.Name, b.Name)
	}},
}

// bestReplica is the candidate the table prefers for c.purpose: the one that meets every
// requirement and comes first by the tie-breakers; nil when none meets them.
func bestReplica(candidates []fsm.Pod, c choice) *fsm.Pod {
	var best *fsm.Pod
next:
	for i, p := range candidates {
		for _, r := range choiceRules {
			if r.uses[c.purpose] == required && !r.keep(c, p) {
				continue next
			}
		}
		if best == nil || better(c, p, *best) {
			best = &candidates[i]
		}
	}
	return best
}

// better reports whether a comes before b by c.purpose's tie-breakers.
func better(c choice, a, b fsm.Pod) bool {
	for _, r := range choiceRules {
		if r.uses[c.purpose] != preferred {
			continue
		}
		if d := r.cmp(c, a, b); d != 0 {
			return d < 0
		}
	}
	return false
}
