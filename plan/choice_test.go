package plan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
)

// The replica each planner promotes, pinned on pools of candidates: the same pool, five
// purposes, five answers where the table says they differ. These cases were written against
// the five pickers the rule replaced (bestSynced, mostUpToDate, bestOfShard, bestCaughtUp,
// bestToSpread) and passed there before the rule took their place; TestReplicaChoiceAsBefore
// compares the rule with copies of them on random pools.

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

// pickFor runs the choice of purpose on pool, with the candidates as each caller passes them:
// live pods by name (failover, takeover, misplaced), the shard's pods (upgrade, spread).
func pickFor(p string, c choicePool) *fsm.Pod {
	primary := c.primary
	return bestReplica(append([]fsm.Pod(nil), c.pods...), choice{purpose: purpose(p), primaryID: primary.Node.ID, primary: &primary,
		shard: c.shard, primaries: c.primaries, up: c.up, cap: c.cap})
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

// The five pickers as they were before the rule replaced them, kept as the oracle of
// TestReplicaChoiceAsBefore.

func oldBestSynced(live []fsm.Pod, primary string) *fsm.Pod {
	var best *fsm.Pod
	for i, p := range live {
		n := p.Node
		if n.Primary || n.PrimaryID != primary || n.ReplOffset <= 0 || p.Lifecycle != string(v1.LifecycleActive) {
			continue
		}
		if best == nil || n.ReplOffset > best.Node.ReplOffset {
			best = &live[i]
		}
	}
	return best
}

func oldMostUpToDate(live []fsm.Pod, primary string) *fsm.Pod {
	var best *fsm.Pod
	for i, p := range live {
		n := p.Node
		if n.Primary || n.PrimaryID != primary || n.ReplOffset <= 0 {
			continue
		}
		if p.Lifecycle == string(v1.LifecycleLeaving) {
			continue
		}
		if best == nil || n.ReplOffset > best.Node.ReplOffset {
			best = &live[i]
		}
	}
	return best
}

func oldBestOfShard(live []fsm.Pod, primary fsm.Pod, shard int) *fsm.Pod {
	var best *fsm.Pod
	for i, r := range live {
		if r.Shard != shard || !fsm.CaughtUp(r, primary) {
			continue
		}
		if best == nil || r.Node.ReplOffset > best.Node.ReplOffset {
			best = &live[i]
		}
	}
	return best
}

func oldBestCaughtUp(pods []fsm.Pod, primary fsm.Pod, primaries map[string]int) *fsm.Pod {
	var best *fsm.Pod
	for i, p := range pods {
		if p.Name == primary.Name || p.Lifecycle != string(v1.LifecycleActive) || !fsm.CaughtUp(p, primary) {
			continue
		}
		if best == nil || primaries[p.Zone] < primaries[best.Zone] ||
			(primaries[p.Zone] == primaries[best.Zone] && p.Node.ReplOffset > best.Node.ReplOffset) {
			best = &pods[i]
		}
	}
	return best
}

func oldBestToSpread(pods []fsm.Pod, primary fsm.Pod, primaries map[string]int, up []string, cap int) *fsm.Pod {
	var best *fsm.Pod
	for i, r := range pods {
		if r.Name == primary.Name || !slices.Contains(up, r.Zone) || primaries[r.Zone] >= cap || !fsm.CaughtUp(r, primary) {
			continue
		}
		if best == nil || primaries[r.Zone] < primaries[best.Zone] ||
			(primaries[r.Zone] == primaries[best.Zone] && (r.Zone < best.Zone || (r.Zone == best.Zone && r.Node.ReplOffset > best.Node.ReplOffset))) {
			best = &pods[i]
		}
	}
	return best
}

// TestReplicaChoiceAsBefore draws random pools (by name, as every caller passes them: small
// offsets and few zones so that ties are common) and checks that the rule picks, for every
// purpose, what the picker it replaced picked.
func TestReplicaChoiceAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	zones := []string{"", "a", "b", "c"}
	lifecycles := []v1.NodeLifecycle{v1.LifecycleJoining, v1.LifecycleActive, v1.LifecycleActive, v1.LifecycleLeaving}
	offsets := []int64{0, 1, 500, 999, 1000, 1000 + fsm.CatchUpBytes, 1001 + fsm.CatchUpBytes}
	for n := range 20000 {
		primary := choicePrimary()
		primary.Node.ReplOffset = offsets[rng.IntN(len(offsets))]
		primary.Zone = zones[rng.IntN(len(zones))]
		primary.Shard = rng.IntN(3)
		pods := []fsm.Pod{primary}
		for i := range rng.IntN(7) {
			p := rep(fmt.Sprintf("r%d", i), zones[rng.IntN(len(zones))], offsets[rng.IntN(len(offsets))], labelled(rng.IntN(3)))
			p.Lifecycle = string(lifecycles[rng.IntN(len(lifecycles))])
			p.Node.LinkUp = rng.IntN(5) > 0
			p.Node.SyncInProgress = rng.IntN(6) == 0
			p.Node.Reachable = rng.IntN(6) > 0
			switch rng.IntN(8) {
			case 0:
				p.Node.PrimaryID = "Q"
			case 1:
				p.Node.Primary, p.Node.PrimaryID = true, ""
			}
			pods = append(pods, p)
		}
		slices.SortFunc(pods, func(a, b fsm.Pod) int { return strings.Compare(a.Name, b.Name) })
		primaries := map[string]int{}
		for _, z := range zones {
			if k := rng.IntN(3); k > 0 {
				primaries[z] = k
			}
		}
		up := slices.DeleteFunc(slices.Clone(zones), func(string) bool { return rng.IntN(4) == 0 })
		c := choice{primaryID: "P", primary: &primary, shard: rng.IntN(3), primaries: primaries, up: up, cap: 1 + rng.IntN(3)}
		for _, p := range choicePurposes {
			var before *fsm.Pod
			switch purpose(p) {
			case forFailover:
				before = oldBestSynced(pods, "P")
			case forTakeover:
				before = oldMostUpToDate(pods, "P")
			case forMisplaced:
				before = oldBestOfShard(pods, primary, c.shard)
			case forUpgrade:
				before = oldBestCaughtUp(pods, primary, primaries)
			case forSpread:
				before = oldBestToSpread(pods, primary, primaries, up, c.cap)
			}
			c.purpose = purpose(p)
			if c.purpose == forFailover || c.purpose == forTakeover {
				c.primary = nil // a lost primary: the callers know its id only
			} else {
				c.primary = &primary
			}
			after := bestReplica(pods, c)
			if name(before) != name(after) {
				t.Fatalf("pool %d, %s: the rule picks %q, the old picker %q\n%+v", n, p, name(after), name(before), pods)
			}
		}
	}
}

func name(p *fsm.Pod) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// The table in choice.go's comment is the rule as a reader sees it: it must say what
// choiceRules do, row by row.
func TestReplicaChoiceTableMatchesTheComment(t *testing.T) {
	src, err := os.ReadFile("choice.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^//\t(\d+)\s+(.+?)\s{2,}(\S)\s+(\S)\s+(\S)\s+(\S)\s+(\S)$`)
	var rows [][]string
	for _, line := range strings.Split(string(src), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows = append(rows, m)
		}
	}
	if len(rows) != len(choiceRules) {
		t.Fatalf("the comment has %d rows, choiceRules %d", len(rows), len(choiceRules))
	}
	for i, r := range choiceRules {
		m := rows[i]
		if m[1] != strconv.Itoa(i+1) || m[2] != r.name {
			t.Errorf("row %d: the comment says %s %q, the code %q", i+1, m[1], m[2], r.name)
		}
		rank := 0 // the tie-breakers' order, per purpose
		for j, p := range choicePurposes {
			want := "-"
			switch r.uses[purpose(p)] {
			case required:
				want = "R"
			case preferred:
				rank = 0
				for _, q := range choiceRules[:i+1] {
					if q.uses[purpose(p)] == preferred {
						rank++
					}
				}
				want = strconv.Itoa(rank)
			}
			if got := m[3+j]; got != want {
				t.Errorf("row %d (%s), %s: the comment says %s, the code %s", i+1, r.name, p, got, want)
			}
		}
		if (r.keep == nil) != (r.cmp != nil) {
			t.Errorf("row %d (%s): a row is a requirement (keep) or a tie-breaker (cmp)", i+1, r.name)
		}
		for p, u := range r.uses {
			if (u == required && r.keep == nil) || (u == preferred && r.cmp == nil) {
				t.Errorf("row %d (%s): %s uses it in a way it cannot be used", i+1, r.name, p)
			}
		}
	}
}
