// Package schedule makes a chaos run's timeline from a seed alone, before the run starts: which
// fault or day-2 change happens when, and to what. Targets are abstract (a cluster, a shard
// index, a role); the runner resolves them to pods at the moment of the event, because which pod
// is a shard's primary then depends on everything that happened before. The same seed, duration
// and clusters always give the same schedule, so a failed run can be replayed.
//
// The rules that keep every fault survivable by design, applied here and at the moment of the
// event by the runner:
//
//  1. No fault takes every copy of a shard at once: the two faults of a pair target two
//     different shards (of one cluster or two), and a node stop or a pair is held back at the
//     moment of the event until no shard would lose its last copy holding the data (its primary,
//     or a replica whose link is up).
//  2. A fault on a primary fires only while its shard has a synced replica to take over; a shard
//     whose replica is still syncing after an earlier fault is waited for, not hit (Valkey's
//     replication is asynchronous and a replica without its first sync holds nothing).
//  3. replicasPerShard never goes below MinReplicas (1): a shard without a replica cannot survive
//     the loss of its only node by design, and every fault on it would have to be held back.
//  4. A cluster is upgraded from 8.0.1 to 9.1.2 at most once and never back: a 9.x primary's
//     stream is not guaranteed to load on an 8.x replica.
//  5. Two day-2 changes of one cluster are at least DayGap apart, so that a change mostly
//     finishes (under faults) before the next one redirects it; faults have no such gap.
package schedule

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is what an event does.
type Kind string

// Faults.
const (
	// Kill SIGKILLs the Valkey process of a shard's primary or replica (the pod goes Failed).
	Kill Kind = "kill"
	// DeletePod deletes the pod (preStop hook, SIGTERM, grace period), as a drain or a person does.
	DeletePod Kind = "delete-pod"
	// StopNode stops the Kubernetes node that runs a shard's primary or replica, every pod on it
	// dying at once, and starts it again after For.
	StopNode Kind = "stop-node"
	// CutNetwork cuts a pod's network for For (three cluster-node-timeouts), the pod running on.
	CutNetwork Kind = "cut-network"
	// ZoneLoss stops every Kubernetes node of one zone, the one whose nodes run the most
	// primaries at that moment among those whose loss takes no shard's last copy (of the local
	// cluster's three zones, one node each), and starts them again after For. Drawn apart from
	// the other events (see Generate).
	ZoneLoss Kind = "zone-loss"
	// KillOperator SIGKILLs the operator and starts it again after For; most follow a day-2
	// change by a few seconds, so the operator dies in the middle of the transition.
	KillOperator Kind = "kill-operator"
)

// Day-2 changes.
const (
	// Upgrade repoints the cluster's ValkeyConfig from the 8.0.1 image to the 9.1.2 one.
	Upgrade Kind = "upgrade"
	// Config changes the cluster's ValkeyConfig by Value: a rolling replacement. The runner sets
	// tcp-backlog to 500+Value (a setting that needs a restart; hz, the setting's old name here,
	// now applies live without one).
	Config Kind = "config"
	// Shards sets spec.shards to Value: a reshard, slots and keys moving.
	Shards Kind = "shards"
	// Replicas sets spec.replicasPerShard to Value.
	Replicas Kind = "replicas"
	// RotatePassword rotates the ACL user's password: the new digest added, the writer moved to
	// the new password, the old digest removed.
	RotatePassword Kind = "rotate-password"
	// RotateCert replaces the TLS Secret's leaf with a new one from the same CA, in place.
	RotateCert Kind = "rotate-certificate"
)

// IsFault tells faults from day-2 changes.
func (k Kind) IsFault() bool {
	switch k {
	case Kill, DeletePod, StopNode, CutNetwork, KillOperator, ZoneLoss:
		return true
	}
	return false
}

// Role names which node of a shard a fault targets.
type Role string

// The roles.
const (
	Primary Role = "primary"
	Replica Role = "replica"
)

// Bounds and timings of a schedule, with why.
const (
	// NodeTimeout is the operator's cluster-node-timeout (resources/resources.go): Valkey marks a
	// silent node failed after it.
	NodeTimeout = 5 * time.Second
	// CutFor is how long a network cut lasts: three node timeouts, long enough for Valkey to
	// fail the node and its shard to fail over, so the restore brings back a stale node.
	CutFor = 3 * NodeTimeout
	// FirstAt leaves the writers time to write before the first event.
	FirstAt = 10 * time.Second
	// MinGap and MaxGap bound the time between two events: about one every 16 s, over three
	// clusters, so that each cluster sees one event every 48 s on average (its last fault's
	// replacement synced, on this 2-core machine) and a 20-minute run holds over 50 faults.
	MinGap = 8 * time.Second
	MaxGap = 24 * time.Second
	// DayGap separates two day-2 changes of one cluster (rule 5): a roll of a 3×1 takes
	// 30–60 s here, a reshard of the writer's keys about as long.
	DayGap = 60 * time.Second
	// MinShards and MaxShards bound spec.shards; MinReplicas and MaxReplicas spec.replicasPerShard
	// (rule 3). Four shards of two replicas are 12 pods, the most one cluster may take here.
	MinShards, MaxShards     = 2, 4
	MinReplicas, MaxReplicas = 1, 2
)

// Event is one step of the schedule.
type Event struct {
	// At is the offset from the start of the schedule.
	At   time.Duration
	Kind Kind
	// Cluster is the target cluster's name (empty for KillOperator).
	Cluster string
	// Shard is the target shard's index; the runner takes it modulo the shards that exist at
	// the moment (a reshard may be under way).
	Shard int
	// Role is which node of the shard a fault targets.
	Role Role
	// Pick chooses among several candidates (the replicas of a shard of two): the runner takes
	// it modulo their count, in pod-name order.
	Pick int
	// Value is the new setting of a day-2 change (shards, replicas, hz).
	Value int
	// For is how long a stopped node, a cut network or a killed operator stays down.
	For time.Duration
	// Pair is non-zero on the two faults of a pair: they fire at once.
	Pair int
	// After names the day-2 change a KillOperator follows, if any.
	After string
}

// String is one line of the printed schedule.
func (e Event) String() string {
	at := fmt.Sprintf("+%02d:%02d.%d", int(e.At.Minutes()), int(e.At.Seconds())%60, (e.At.Milliseconds()%1000)/100)
	var what string
	switch e.Kind {
	case Kill, DeletePod:
		what = fmt.Sprintf("%s %s shard %d %s", e.Kind, e.Cluster, e.Shard, e.Role)
	case StopNode:
		what = fmt.Sprintf("%s running %s shard %d %s, for %s", e.Kind, e.Cluster, e.Shard, e.Role, e.For)
	case CutNetwork:
		what = fmt.Sprintf("%s %s shard %d %s, for %s", e.Kind, e.Cluster, e.Shard, e.Role, e.For)
	case ZoneLoss:
		what = fmt.Sprintf("%s of the zone running the most primaries (that can go), for %s", e.Kind, e.For)
	case KillOperator:
		what = fmt.Sprintf("%s, down %s", e.Kind, e.For)
		if e.After != "" {
			what += ", in the middle of " + e.After
		}
	case Upgrade, RotatePassword, RotateCert:
		what = fmt.Sprintf("%s %s", e.Kind, e.Cluster)
	default:
		what = fmt.Sprintf("%s %s to %d", e.Kind, e.Cluster, e.Value)
	}
	if e.Kind == Kill || e.Kind == DeletePod || e.Kind == CutNetwork || e.Kind == StopNode {
		if e.Role == Replica {
			what += fmt.Sprintf(" (pick %d)", e.Pick)
		}
	}
	if e.Pair != 0 {
		what += fmt.Sprintf(" [pair %d]", e.Pair)
	}
	return at + "  " + what
}

// Cluster is one cluster's spec, as the schedule knows it.
type Cluster struct {
	Name             string
	Shards, Replicas int
	// Version is the Valkey version its image runs: "8.0.1" or "9.1.2".
	Version string
	// ACL: the cluster binds a user whose password rotates; TLS: the cluster runs TLS-only.
	ACL, TLS bool
	// Hz is its config's hz setting (Valkey's default, 10, until a Config change).
	Hz int
}

// Versions the local cluster runs (tests/localcluster).
const (
	Valkey8 = "8.0.1"
	Valkey9 = "9.1.2"
)

// Options are a schedule's inputs: the same Options give the same Schedule.
type Options struct {
	Seed     uint64
	Duration time.Duration
	Clusters []Cluster
}

// Schedule is the whole run, decided before it starts.
type Schedule struct {
	Options
	Events []Event
	// Final is each cluster's spec after the last change: what the run must converge to.
	Final []Cluster
}

// Faults counts the faults (each of a pair counts).
func (s Schedule) Faults() int {
	n := 0
	for _, e := range s.Events {
		if e.Kind.IsFault() {
			n++
		}
	}
	return n
}

// String prints the seed, the clusters, every event and the final specs.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos schedule: seed %d, duration %s, %d events (%d faults)\n", s.Seed, s.Duration, len(s.Events), s.Faults())
	for _, c := range s.Clusters {
		fmt.Fprintf(&b, "  start %s\n", c)
	}
	for _, e := range s.Events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	for _, c := range s.Final {
		fmt.Fprintf(&b, "  final %s\n", c)
	}
	return b.String()
}

func (c Cluster) String() string {
	s := fmt.Sprintf("%s: %d×%d Valkey %s hz %d", c.Name, c.Shards, c.Replicas, c.Version, c.hz())
	if c.ACL {
		s += " ACL"
	}
	if c.TLS {
		s += " TLS"
	}
	return s
}

func (c Cluster) hz() int {
	if c.Hz == 0 {
		return 10
	}
	return c.Hz
}

// hzValues are the `hz` settings a Config change picks from: each differs from Valkey's
// default and does not change behaviour a test can see, only that every node is replaced.
var hzValues = []int{10, 15, 20, 25}

// Generate makes the schedule of o. Only the seeded generator decides: never the clock.
func Generate(o Options) Schedule {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	g := &gen{r: r, clusters: append([]Cluster(nil), o.Clusters...), lastDay: make([]time.Duration, len(o.Clusters))}
	for i := range g.lastDay {
		g.lastDay[i] = -DayGap
	}
	for at := FirstAt; at < o.Duration; at += MinGap + time.Duration(r.Int64N(int64(MaxGap-MinGap))) {
		at = at.Round(100 * time.Millisecond)
		if c := g.dayCandidate(at); c >= 0 && r.IntN(100) < 30 {
			g.dayChange(at, c)
			continue
		}
		g.fault(at)
	}
	g.zoneLosses(o)
	sortEvents(g.events)
	return Schedule{Options: o, Events: g.events, Final: g.clusters}
}

type gen struct {
	r        *rand.Rand
	clusters []Cluster
	lastDay  []time.Duration
	events   []Event
	pairs    int
}

// dayCandidate picks a cluster that may take a day-2 change at `at` (rule 5), or -1.
func (g *gen) dayCandidate(at time.Duration) int {
	var ok []int
	for i := range g.clusters {
		if at-g.lastDay[i] >= DayGap {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return -1
	}
	return ok[g.r.IntN(len(ok))]
}

func (g *gen) dayChange(at time.Duration, i int) {
	c := &g.clusters[i]
	kinds := []Kind{Config}
	if c.Version == Valkey8 {
		kinds = append(kinds, Upgrade, Upgrade) // twice the weight: it can happen only once
	}
	if c.Shards < MaxShards || c.Shards > MinShards {
		kinds = append(kinds, Shards)
	}
	if c.Replicas < MaxReplicas || c.Replicas > MinReplicas {
		kinds = append(kinds, Replicas)
	}
	if c.ACL {
		kinds = append(kinds, RotatePassword)
	}
	if c.TLS {
		kinds = append(kinds, RotateCert)
	}
	e := Event{At: at, Kind: kinds[g.r.IntN(len(kinds))], Cluster: c.Name}
	switch e.Kind {
	case Upgrade:
		c.Version = Valkey9
	case Config:
		for e.Value = c.hz(); e.Value == c.hz(); {
			e.Value = hzValues[g.r.IntN(len(hzValues))]
		}
		c.Hz = e.Value
	case Shards:
		e.Value = step(g.r, c.Shards, MinShards, MaxShards)
		c.Shards = e.Value
	case Replicas:
		e.Value = step(g.r, c.Replicas, MinReplicas, MaxReplicas)
		c.Replicas = e.Value
	}
	g.lastDay[i] = at
	g.events = append(g.events, e)
	// Half of the changes have the operator killed a few seconds in: it must resume the
	// transition from what it observes, never redo a step.
	if g.r.IntN(2) == 0 {
		g.events = append(g.events, Event{
			At:   at + (500*time.Millisecond + time.Duration(g.r.Int64N(int64(5500*time.Millisecond)))).Round(100*time.Millisecond),
			Kind: KillOperator, For: time.Duration(g.r.Int64N(int64(5 * time.Second))).Round(100 * time.Millisecond),
			After: fmt.Sprintf("%s %s", e.Kind, c.Name),
		})
	}
}

// ZoneLossEvery is how much schedule carries one zone loss: none in the bounded run of `make
// test`, three in a 30-minute one.
const ZoneLossEvery = 10 * time.Minute

// zoneLosses adds one ZoneLoss per whole ZoneLossEvery of the schedule, at a random time in the
// middle half of it, for 30–60 s. They come from a generator of their own, seeded from the seed,
// so that every other event of a seed is what it was before zone losses existed: a seed
// recorded earlier replays the same faults, plus its zone losses.
func (g *gen) zoneLosses(o Options) {
	r := rand.New(rand.NewPCG(o.Seed^0x2545f4914f6cdd1d, o.Seed))
	for start := time.Duration(0); start+ZoneLossEvery <= o.Duration; start += ZoneLossEvery {
		at := start + ZoneLossEvery/4 + time.Duration(r.Int64N(int64(ZoneLossEvery/2)))
		g.events = append(g.events, Event{At: at.Round(100 * time.Millisecond), Kind: ZoneLoss,
			For: (30*time.Second + time.Duration(r.Int64N(int64(30*time.Second)))).Round(100 * time.Millisecond)})
	}
}

// step moves v one up or down within [lo, hi].
func step(r *rand.Rand, v, lo, hi int) int {
	switch {
	case v <= lo:
		return v + 1
	case v >= hi:
		return v - 1
	case r.IntN(2) == 0:
		return v + 1
	}
	return v - 1
}

// Fault weights, out of 100.
var faultWeights = []struct {
	kind Kind
	role Role
	w    int
}{
	{Kill, Primary, 20},
	{Kill, Replica, 10},
	{DeletePod, Primary, 8},
	{DeletePod, Replica, 6},
	{StopNode, Primary, 8},
	{StopNode, Replica, 4},
	{CutNetwork, Primary, 8},
	{CutNetwork, Replica, 6},
	{KillOperator, "", 12},
	{"pair", "", 18},
}

func (g *gen) fault(at time.Duration) {
	n := g.r.IntN(100)
	for _, f := range faultWeights {
		if n -= f.w; n >= 0 {
			continue
		}
		switch f.kind {
		case KillOperator:
			g.events = append(g.events, Event{At: at, Kind: KillOperator, For: time.Duration(g.r.Int64N(int64(5 * time.Second))).Round(100 * time.Millisecond)})
		case "pair":
			g.pair(at)
		default:
			g.events = append(g.events, g.target(at, f.kind, f.role))
		}
		return
	}
}

// target fills in a fault on a shard of a random cluster.
func (g *gen) target(at time.Duration, kind Kind, role Role) Event {
	c := g.clusters[g.r.IntN(len(g.clusters))]
	e := Event{At: at, Kind: kind, Cluster: c.Name, Shard: g.r.IntN(c.Shards), Role: role, Pick: g.r.IntN(100)}
	switch kind {
	case StopNode:
		e.For = (15*time.Second + time.Duration(g.r.Int64N(int64(25*time.Second)))).Round(100 * time.Millisecond)
	case CutNetwork:
		e.For = CutFor
	}
	return e
}

// pair is two faults at once on two different shards (rule 1): kills, deletions and cuts, on
// either role.
func (g *gen) pair(at time.Duration) {
	kinds := []Kind{Kill, Kill, DeletePod, CutNetwork}
	roles := []Role{Primary, Primary, Replica}
	g.pairs++
	first := g.target(at, kinds[g.r.IntN(len(kinds))], roles[g.r.IntN(len(roles))])
	var second Event
	for {
		second = g.target(at, kinds[g.r.IntN(len(kinds))], roles[g.r.IntN(len(roles))])
		if second.Cluster != first.Cluster || second.Shard != first.Shard {
			break
		}
	}
	first.Pair, second.Pair = g.pairs, g.pairs
	g.events = append(g.events, first, second)
}

// sortEvents orders by time, keeping the generation order of equal times (a pair's two).
func sortEvents(ev []Event) {
	slices.SortStableFunc(ev, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
}
