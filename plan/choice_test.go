package plan

import (
	"fmt"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The replica each planner promotes, pinned on pools of candidates: the same pool, five
// purposes, five answers where the rule says they differ. These cases were written against the
// five pickers the rule replaced (bestSynced, mostUpToDate, bestOfShard, bestCaughtUp,
// bestToSpread) and passed there before the rule took their place.

// choicePrimary is the primary the replicas of a pool follow: pod p, node P, in zone a, at
// offset 1000.
func choicePrimary() fsm.Pod {
	return fsm.Pod{Name: "p", Zone: "a", Phase: fsm.PodRunning, Lifecycle: string(v1.LifecycleActive),
		Node: &fsm.Node{Reachable: true, ID: "P", Primary: true, ReplOffset: 1000}}
}

// rep is a reachable Active replica of P, labelled shard 0, link up, at offset.
func rep(name, zone string, offset int64, mods ...func(*fsm.Pod)) fsm.Pod {
	p := fsm.Pod{Name: name, Zone: zone, Phase: fsm.PodRunning, Lifecycle: string(v1.LifecycleActive),
		Node: &fsm.Node{Reachable: true, ID: "id-" + name, PrimaryID: "P", LinkUp: true, ReplOffset: offset}}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func joining(p *fsm.Pod)  { p.Lifecycle = string(v1.LifecycleJoining) }
func leaving(p *fsm.Pod)  { p.Lifecycle = string(v1.LifecycleLeaving) }
func linkDown(p *fsm.Pod) { p.Node.LinkUp = false }
func syncing(p *fsm.Pod)  { p.Node.SyncInProgress = true }
func silent(p *fsm.Pod)   { p.Node.Reachable = false }
func follows(id string) func(*fsm.Pod) {
	return func(p *fsm.Pod) { p.Node.PrimaryID = id }
}
func labelled(shard int) func(*fsm.Pod) { return func(p *fsm.Pod) { p.Shard = shard } }

// aheadPrimary puts a primary more than fsm.CatchUpBytes ahead of every replica at 1000 or
// below: they lag it.
func aheadPrimary(p *fsm.Pod) { p.Node.ReplOffset = 1000 + 2*fsm.CatchUpBytes }

// choicePool is a set of candidates and what each purpose picks from it ("" for none).
type choicePool struct {
	name    string
	primary fsm.Pod
	pods    []fsm.Pod
	// shard is the label a misplaced realign asks for (0 unless set).
	shard int
	// primaries are the other shards' primaries by zone (upgrade, spread); up the zones up and
	// cap the cap (spread).
	primaries map[string]int
	up        []string
	cap       int
	want      map[string]string
}

var choicePurposes = []string{"failover", "takeover", "misplaced", "upgrade", "spread"}

func choicePools() []choicePool {
	p := choicePrimary()
	far := choicePrimary()
	aheadPrimary(&far) // every replica at 1000 or below trails it by more than CatchUpBytes
	all := []string{"a", "b", "c"}
	return []choicePool{
		{name: "no candidate", primary: p, pods: []fsm.Pod{p}, up: all, cap: 9,
			want: map[string]string{}},
		{name: "largest offset wins", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 900), rep("r2", "a", 990), rep("r3", "a", 950)}, up: all, cap: 9,
			want: map[string]string{"failover": "r2", "takeover": "r2", "misplaced": "r2", "upgrade": "r2", "spread": "r2"}},
		{name: "a tie goes to the first by name", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 990), rep("r2", "a", 990), rep("r3", "a", 990)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r1", "spread": "r1"}},
		{name: "offset 0 is not synced, unless the primary is empty too", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 0), rep("r2", "a", 0)}, up: all, cap: 9,
			want: map[string]string{}},
		{name: "an empty primary: offset 0 is caught up", primary: func() fsm.Pod { q := choicePrimary(); q.Node.ReplOffset = 0; return q }(),
			pods: []fsm.Pod{rep("r1", "a", 0), rep("r2", "b", 0)}, up: all, cap: 9,
			want: map[string]string{"misplaced": "r1", "upgrade": "r1", "spread": "r1"}},
		{name: "a lagging replica is synced but not caught up", primary: far, pods: []fsm.Pod{far, rep("r1", "a", 500), rep("r2", "a", 400)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1"}},
		{name: "a lagging replica with the largest offset loses to a caught-up one", primary: p,
			pods: []fsm.Pod{p, rep("r1", "a", 990, linkDown), rep("r2", "a", 995, syncing), rep("r3", "a", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r2", "takeover": "r2", "misplaced": "r3", "upgrade": "r3", "spread": "r3"}},
		{name: "Joining: not for a failover or a roll", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 999, joining), rep("r2", "a", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r2", "takeover": "r1", "misplaced": "r1", "upgrade": "r2", "spread": "r1"}},
		{name: "Leaving: only a takeover refuses it besides the Active ones", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 999, leaving), rep("r2", "a", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r2", "takeover": "r2", "misplaced": "r1", "upgrade": "r2", "spread": "r1"}},
		{name: "only non-Active replicas", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 900, leaving), rep("r2", "a", 950, joining)}, up: all, cap: 9,
			want: map[string]string{"takeover": "r2", "misplaced": "r2", "spread": "r2"}},
		{name: "a replica of another primary is never chosen", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 999, follows("Q")), rep("r2", "a", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r2", "takeover": "r2", "misplaced": "r2", "upgrade": "r2", "spread": "r2"}},
		{name: "a silent replica is not caught up", primary: p, pods: []fsm.Pod{p, rep("r1", "a", 999, silent), rep("r2", "a", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r2", "upgrade": "r2", "spread": "r2"}},
		{name: "the shard label binds only a realign", primary: p, shard: 1,
			pods: []fsm.Pod{p, rep("r1", "a", 999), rep("r2", "a", 900, labelled(1)), rep("r3", "a", 950, labelled(2))}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r2", "upgrade": "r1", "spread": "r1"}},
		{name: "a realign with no replica of its shard", primary: p, shard: 2,
			pods: []fsm.Pod{p, rep("r1", "a", 999), rep("r2", "a", 900, labelled(1))}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "upgrade": "r1", "spread": "r1"}},
		{name: "the zone with fewest primaries beats the offset", primary: p, primaries: map[string]int{"a": 2, "b": 1, "c": 1},
			pods: []fsm.Pod{p, rep("r1", "a", 999), rep("r2", "b", 900), rep("r3", "c", 950)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r3", "spread": "r2"}},
		{name: "equal zones: a roll takes the offset, a spread the zone's name", primary: p, primaries: map[string]int{"b": 1, "c": 1},
			pods: []fsm.Pod{p, rep("r1", "c", 999), rep("r2", "b", 900), rep("r3", "b", 950)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r1", "spread": "r3"}},
		{name: "a zone with no primary counts as none", primary: p, primaries: map[string]int{"a": 1, "b": 1},
			pods: []fsm.Pod{p, rep("r1", "a", 999), rep("r2", "b", 900), rep("r3", "c", 100)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r3", "spread": "r3"}},
		{name: "a spread refuses a zone down", primary: p, primaries: map[string]int{"a": 2},
			pods: []fsm.Pod{p, rep("r1", "b", 999), rep("r2", "c", 900)}, up: []string{"a", "c"}, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r1", "spread": "r2"}},
		{name: "a spread refuses a zone at the cap", primary: p, primaries: map[string]int{"a": 2, "b": 1, "c": 2},
			pods: []fsm.Pod{p, rep("r1", "b", 900), rep("r2", "c", 999)}, up: all, cap: 1,
			want: map[string]string{"failover": "r2", "takeover": "r2", "misplaced": "r2", "upgrade": "r1"}},
		{name: "an unbound replica is in zone \"\"", primary: p, primaries: map[string]int{"a": 1},
			pods: []fsm.Pod{p, rep("r1", "a", 999), rep("r2", "", 900)}, up: []string{"a", ""}, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r2", "spread": "r2"}},
		{name: "ties everywhere, names out of zone order", primary: p, primaries: map[string]int{"a": 1, "b": 1, "c": 1},
			pods: []fsm.Pod{p, rep("r1", "c", 900), rep("r2", "b", 900), rep("r3", "a", 900), rep("r4", "b", 900)}, up: all, cap: 9,
			want: map[string]string{"failover": "r1", "takeover": "r1", "misplaced": "r1", "upgrade": "r1", "spread": "r3"}},
		{name: "many mixed", primary: p, shard: 0, primaries: map[string]int{"a": 1, "b": 0, "c": 2},
			pods: []fsm.Pod{p,
				rep("r1", "a", 1000, joining), rep("r2", "b", 1000, linkDown), rep("r3", "b", 998), rep("r4", "c", 999),
				rep("r5", "b", 998), rep("r6", "a", 1001, follows("Q")), rep("r7", "b", 999, labelled(1)), rep("r8", "a", 0)},
			up: all, cap: 2,
			want: map[string]string{"failover": "r2", "takeover": "r1", "misplaced": "r1", "upgrade": "r7", "spread": "r7"}},
	}
}

// pickFor runs the choice of purpose on pool.
func pickFor(purpose string, c choicePool) *fsm.Pod {
	// The candidates as each caller passes them: live pods by name (failover, takeover,
	// misplaced), the shard's pods (upgrade, spread).
	pods := append([]fsm.Pod(nil), c.pods...)
	switch purpose {
	case "failover":
		return bestSynced(pods, c.primary.Node.ID)
	case "takeover":
		return mostUpToDate(pods, c.primary.Node.ID)
	case "misplaced":
		return bestOfShard(pods, c.primary, c.shard)
	case "upgrade":
		return bestCaughtUp(pods, c.primary, c.primaries)
	case "spread":
		return bestToSpread(pods, c.primary, c.primaries, c.up, c.cap)
	}
	panic("unknown purpose " + purpose)
}

func TestReplicaChoice(t *testing.T) {
	for _, c := range choicePools() {
		for _, purpose := range choicePurposes {
			t.Run(fmt.Sprintf("%s/%s", c.name, purpose), func(t *testing.T) {
				got := ""
				if best := pickFor(purpose, c); best != nil {
					got = best.Name
				}
				if want := c.want[purpose]; got != want {
					t.Errorf("picked %q, want %q", got, want)
				}
			})
		}
	}
}
