package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/valkey"
)

// What the zone-loss drill expects of the operator, in one place.
const (
	// spreadFailoverMsg is the INFO line of a graceful CLUSTER FAILOVER that moves a primary out
	// of a zone holding more primaries than it must (fields cluster_name, pod, node, shard, zone);
	// movingCopyMsg the line of a copy of a shard created in another zone (pod, shard, zone, from).
	spreadFailoverMsg = logging.MsgSpreadingPrimaries
	movingCopyMsg     = logging.MsgMovingCopy
	// zoneSpreadTimeout bounds the wait for the spread after formation; zoneReturnTimeout the wait
	// for it after a lost zone returns (replicas moved back one at a time, then primaries).
	// Safety nets, not speed claims: the drill reports its timings, BenchmarkZoneLoss averages them.
	zoneSpreadTimeout = 3 * time.Minute
	zoneReturnTimeout = 10 * time.Minute
)

// drillZones are the local cluster's zones (localcluster.DefaultNodes: node-a in zone-a, ...),
// all listed in the drill's spec.placement.zones.
var drillZones = []string{"zone-a", "zone-b", "zone-c"}

// ZoneDrill is what one zone-loss drill measured; every duration counts from the zone's stop but
// SpreadAgain, which counts from its return.
type ZoneDrill struct {
	Zone, Node string
	// Outage is the writer's refusals around the stop.
	Outage outage
	// StateOK: every surviving node said cluster_state:ok with no slot on a lost node;
	// ReadyAgain: Ready on the zones left.
	StateOK, ReadyAgain time.Duration
	// SpreadAgain: the spread held again after the zone returned.
	SpreadAgain time.Duration
	// ReturnLongest is the longest refusal of a write that began after the zone returned (moving
	// replicas and primaries back), and ReturnRefusals how many runs of refusals there were.
	ReturnLongest  time.Duration
	ReturnRefusals int
	Report         Report
}

// ZoneLossDrill runs the drill of TestZoneLossDrill on a new shards x 1 cluster in namespace ns.
func ZoneLossDrill(t testing.TB, ns string, shards int32) ZoneDrill {
	var d ZoneDrill
	n := int(shards)

	// 1. Apply, Ready, spread.
	vc := zoneSpreadCluster(t, ns, shards)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("layout at the end: %s", zoneLayoutOf(t, vc, "", drillZones))
		}
	})
	initial, spreadHeld := waitZoneSpread(t, vc, n, 1, zoneSpreadTimeout)
	t.Logf("formed: %s", initial)
	if spreadHeld {
		t.Logf("spread held after formation")
	} else if clashes := initial.shardZoneClashes(); len(clashes) > 0 {
		t.Fatalf("a shard has two members in one zone after formation; losing that zone would lose the shard: %s", strings.Join(clashes, "; "))
	}
	// When the spread did not hold (an error already), the drill goes on: the rest is evidence of
	// its own. The zone stopped is then the one holding a primary with the fewest primaries, so
	// that the loss is one Valkey's own failover can heal; with the spread, every zone is alike.
	d.Zone, d.Node = initial.zoneToStop()
	if d.Zone == "" {
		t.Fatalf("no zone holds a primary: %s", initial)
	}

	// 2. The writer.
	w, opts := StartClusterWriter(t, vc)

	// 3. Stop the zone's node.
	var lost, survivors []string
	exclude, lostIDs := map[string]bool{}, map[string]bool{}
	for _, m := range initial.members {
		if m.node == d.Node {
			lost = append(lost, m.describe())
			exclude[m.pod], lostIDs[m.id] = true, true
		} else {
			survivors = append(survivors, m.pod)
		}
	}
	t.Logf("stopping %s (%s), where %s run", d.Node, d.Zone, strings.Join(lost, ", "))
	stopAt := time.Now()
	if err := Cluster.Kubelet.StopNode(d.Node); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if t.Failed() {
			t.Logf("layout with %s down: %s", d.Zone, zoneLayoutOf(t, vc, d.Node, drillZones))
		}
		if err := Cluster.Kubelet.StartNode(d.Node); err != nil {
			t.Errorf("restart node %s: %v", d.Node, err)
		}
	})

	// 4. The survivors serve every slot again, by Valkey's own failover.
	d.StateOK = waitServedBySurvivors(t, vc, survivors, lostIDs, stopAt, HealTimeout)
	t.Logf("every survivor says cluster_state:ok, no slot on a lost node, %s after the stop", d.StateOK.Round(time.Millisecond))

	// 5. Ready on the two zones left; no shard has two live members in one zone.
	d.ReadyAgain = WaitReady(t, vc, n, 1, exclude, HealTimeout).Sub(stopAt)
	down := zoneLayoutOf(t, vc, d.Node, drillZones)
	t.Logf("Ready again %s after the stop, %s down: %s", d.ReadyAgain.Round(time.Millisecond), d.Zone, down)
	for _, c := range down.shardZoneClashes() {
		t.Errorf("with %s down: %s", d.Zone, c)
	}
	if ps := down.primariesPerZone(); len(ps) > 0 {
		t.Logf("primaries per zone with %s down: %v (the spread allows %d)", d.Zone, ps, ceilDiv(n, len(down.zones)))
	}
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}

	// 6. The zone returns; the spread holds again, with no manual step.
	returnAt := time.Now()
	if err := Cluster.Kubelet.StartNode(d.Node); err != nil {
		t.Fatalf("restart node %s: %v", d.Node, err)
	}
	restarted = true
	final, held := waitZoneSpread(t, vc, n, 1, zoneReturnTimeout)
	d.SpreadAgain = time.Since(returnAt)
	if held {
		t.Logf("spread again %s after %s returned: %s", d.SpreadAgain.Round(time.Millisecond), d.Zone, final)
	}
	if err := w.WaitAcked(20, time.Minute); err != nil {
		t.Error(err)
	}

	// 7. Read back: no key a replica acknowledged is lost (finishWriter fails the test otherwise);
	// keys acknowledged by a crashed primary alone are logged apart.
	d.Report = FinishWriter(t, w, vc, opts)
	d.Outage = outageAt(d.Report.Refusals, stopAt, writerOpTimeout(opts))
	d.ReturnLongest, d.ReturnRefusals = refusalsSince(d.Report.Refusals, returnAt)
	t.Logf("zone %s lost: %s; survivors serving every slot %s, Ready on the zones left %s after the stop",
		d.Zone, d.Outage, d.StateOK.Round(time.Millisecond), d.ReadyAgain.Round(time.Millisecond))
	t.Logf("zone %s returned: spread again %s after (held: %v); %d runs of refused writes since, the longest %s",
		d.Zone, d.SpreadAgain.Round(time.Millisecond), held, d.ReturnRefusals, d.ReturnLongest.Round(time.Millisecond))

	checkZoneDrillLog(t, ns, stopAt, returnAt, spreadHeld && held)
	return d
}

// zoneSpreadCluster creates, in a new namespace ns, a shards x 1 cluster over drillZones with
// zoneSpread required, and waits until it is Active and Ready.
func zoneSpreadCluster(t testing.TB, ns string, shards int32) *v1.ValkeyCluster {
	t.Helper()
	SetupNamespace(t, ns)
	Create(t, NewImage(ns+"-image"), NewConfig(ns+"-config", ns+"-image"))
	vc := NewCluster(ns, "vc", ns+"-config", WithShards(shards), WithReplicas(1))
	vc.Spec.Placement = &v1.Placement{Zones: slices.Clone(drillZones), ZoneSpread: v1.ZoneSpreadRequired}
	Create(t, vc)
	if _, err := WaitState(context.Background(), K8s, client.ObjectKeyFromObject(vc), v1.StateActive, FormTimeout); err != nil {
		t.Fatal(err)
	}
	WaitReady(t, vc, int(shards), 1, nil, FormTimeout)
	return vc
}

// waitZoneSpread waits, every zone up, until the cluster is Ready for its generation, Valkey says
// it is whole and its layout is spread (zoneLayout.spreadProblems). On timeout it fails the test
// (an error, not fatal: the drill goes on for the rest of its evidence) with every pod's zone and
// role, the pods not running and each node's own view, and returns the last layout and false.
func waitZoneSpread(t testing.TB, vc *v1.ValkeyCluster, shards, replicas int, timeout time.Duration) (zoneLayout, bool) {
	t.Helper()
	var l zoneLayout
	var problems []string
	Poll(t.Context(), timeout, func() string {
		problems = nil
		l = zoneLayoutOf(t, vc, "", drillZones)
		cur := CurrentCluster(t, vc)
		switch {
		case !meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady):
			problems = append(problems, fmt.Sprintf("not Ready: state %s, message %q", cur.Status.State, cur.Status.Message))
		case cur.Status.ObservedGeneration != cur.Generation:
			problems = append(problems, fmt.Sprintf("observedGeneration %d, generation %d", cur.Status.ObservedGeneration, cur.Generation))
		}
		if p := ClusterHealthy(t, vc, shards, replicas, nil); p != "" {
			problems = append(problems, "Valkey: "+p)
		}
		problems = append(problems, l.spreadProblems(shards)...)
		return strings.Join(problems, "\n  ")
	})
	if len(problems) == 0 {
		return l, true
	}
	logValkeyViews(t, vc)
	t.Errorf("%s/%s not spread over zones within %s:\n  %s\nlayout: %s", vc.Namespace, vc.Name, timeout, strings.Join(problems, "\n  "), l)
	return l, false
}

// waitServedBySurvivors waits until every pod of survivors answers, says cluster_state:ok and
// gives no slot to a node of lost (by id): the survivors noticed the loss and serve every slot
// among themselves. Right after a fault the survivors still say ok, having noticed nothing, so
// cluster_state alone would prove nothing. It returns how long after since that was.
func waitServedBySurvivors(t testing.TB, vc *v1.ValkeyCluster, survivors []string, lost map[string]bool, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	creds := Creds(t, vc)
	for {
		pods := LivePods(t, vc)
		var addrs []string
		var problems []string
		for _, name := range survivors {
			p, ok := pods[name]
			if !ok || p.Status.PodIP == "" {
				problems = append(problems, name+" is gone")
				continue
			}
			addrs = append(addrs, PodAddr(p))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		views := valkey.Observe(ctx, addrs, creds)
		cancel()
		for _, v := range views {
			if !v.Reachable || !v.ClusterStateOK() {
				problems = append(problems, fmt.Sprintf("%s: reachable %v, cluster_state %q", v.Addr, v.Reachable, v.ClusterInfo["cluster_state"]))
				continue
			}
			for _, n := range v.Nodes {
				if lost[n.ID] && len(n.Slots) > 0 {
					problems = append(problems, fmt.Sprintf("%s: lost node %.8s still serves %d slot ranges (flags %v)", v.Addr, n.ID, len(n.Slots), n.Flags))
				}
			}
		}
		if len(problems) == 0 {
			return time.Since(since)
		}
		if time.Since(since) > timeout {
			logValkeyViews(t, vc)
			t.Fatalf("survivors %v not serving every slot %s after the stop: %s", survivors, timeout, strings.Join(problems, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkZoneDrillLog checks the operator's log for the drill's cluster: no TAKEOVER (a majority of
// primaries survived the zone, so Valkey's own failover suffices), and at least one line of
// spreadFailoverMsg with its fields, unless the spread held (spreadHeld: after formation and after
// the return) without one, which it says.
func checkZoneDrillLog(t testing.TB, ns string, stopAt, returnAt time.Time, spreadHeld bool) {
	t.Helper()
	phase := func(l LogLine) string {
		at, err := time.Parse(time.RFC3339Nano, l.Timestamp)
		switch {
		case err != nil:
			return l.Timestamp
		case !at.Before(returnAt):
			return "after the return"
		case !at.Before(stopAt):
			return "while the zone was down"
		}
		return "before the stop"
	}
	var spread, moved, forced []string
	for _, l := range ParseLog(t, Op.Logs()) {
		if !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		switch l.Message() {
		case logging.MsgNoQuorumTakeover:
			t.Errorf("TAKEOVER with a majority of primaries up: %s", l.Raw)
		case logging.MsgPrimaryGonePromoting:
			forced = append(forced, fmt.Sprintf("%s: shard %v to %v", phase(l), l.Fields[logging.FieldShard], l.Fields[logging.FieldPod]))
		case movingCopyMsg:
			moved = append(moved, fmt.Sprintf("%s: shard %v, %v in %v (from %v)", phase(l),
				l.Fields[logging.FieldShard], l.Fields[logging.FieldPod], l.Fields[logging.FieldZone], l.Fields[logging.FieldFrom]))
		case spreadFailoverMsg:
			spread = append(spread, fmt.Sprintf("%s: shard %v to %v, leaving %v", phase(l),
				l.Fields[logging.FieldShard], l.Fields[logging.FieldPod], l.Fields[logging.FieldZone]))
			for _, f := range []string{logging.FieldClusterName, logging.FieldPod, logging.FieldNode, logging.FieldShard, logging.FieldZone} {
				if _, ok := l.Fields[f]; !ok {
					t.Errorf("%q line without field %s: %s", spreadFailoverMsg, f, l.Raw)
				}
			}
		}
	}
	if len(forced) > 0 {
		t.Logf("%q lines:\n  %s", logging.MsgPrimaryGonePromoting, strings.Join(forced, "\n  "))
	}
	if len(moved) > 0 {
		t.Logf("%q lines:\n  %s", movingCopyMsg, strings.Join(moved, "\n  "))
	}
	switch {
	case len(spread) > 0:
		t.Logf("%d %q lines:\n  %s", len(spread), spreadFailoverMsg, strings.Join(spread, "\n  "))
	case !spreadHeld:
		t.Errorf("no %q line, and the spread did not hold", spreadFailoverMsg)
	default:
		t.Logf("no %q line: the spread held without one", spreadFailoverMsg)
	}
}

// outage is what the writer saw of one fault: the runs of refused writes, on any slot, that make
// one unbroken window from the fault on.
type outage struct {
	// Longest is the longest run of refused (or unanswered) writes of one slot in the window, and
	// Slot that slot (-1: none refused).
	Longest time.Duration
	Slot    int
	// AllAcked is from the fault until the end of the window: every slot acknowledged again.
	AllAcked time.Duration
	// Slots is how many slots refused in the window, Writes how many writes.
	Slots, Writes int
}

func (o outage) String() string {
	if o.Slot < 0 {
		return "no write refused"
	}
	return fmt.Sprintf("longest refusal %s (slot %d), every slot acknowledged again %s after the stop (%d writes refused on %d slots)",
		o.Longest.Round(time.Millisecond), o.Slot, o.AllAcked.Round(time.Millisecond), o.Writes, o.Slots)
}

// outageAt gathers, from a report's refusals (in order of start), the window of the fault at at:
// it starts as [at, at+slack] and takes in every refusal that overlaps it, growing to its end.
// The slack covers a write begun right after at: the writers pause between writes and a write
// takes up to the writer's operation timeout, so pass that. Pure, for the benchmarks as well.
func outageAt(refusals []Refusal, at time.Time, slack time.Duration) outage {
	o := outage{Slot: -1}
	end := at.Add(slack)
	slots := map[int]bool{}
	for _, r := range refusals {
		if r.Start.After(end) {
			break
		}
		if !r.End.After(at) {
			continue
		}
		if r.End.After(end) {
			end = r.End
		}
		if d := r.End.Sub(r.Start); d > o.Longest || o.Slot < 0 {
			o.Longest, o.Slot = d, r.Slot
		}
		if d := r.End.Sub(at); d > o.AllAcked {
			o.AllAcked = d
		}
		slots[r.Slot] = true
		o.Writes += r.Writes
	}
	o.Slots = len(slots)
	return o
}

// refusalsSince is the longest of the refusals that began at or after since, and their number.
func refusalsSince(refusals []Refusal, since time.Time) (longest time.Duration, n int) {
	for _, r := range refusals {
		if r.Start.Before(since) {
			continue
		}
		n++
		longest = max(longest, r.End.Sub(r.Start))
	}
	return longest, n
}

// zoneLayout is where a cluster's members run and what Valkey says they are: every running pod
// off the node down, its Kubernetes node and that node's zone (label topology.kubernetes.io/zone),
// joined with the node's own CLUSTER NODES entry (role, primary, slots).
type zoneLayout struct {
	zones   []string // the zones counted: those asked for whose node is up
	members []zoneMember
	down    []zoneMember // running in the API on the node down: not answering, not counted
	pending []string     // pods not running, with why
}

type zoneMember struct {
	pod, node, zone, shard string // shard: the pod's shard label
	id                     string
	role                   valkey.Role
	primary                string // a replica's primary, by pod (or node id when no pod has it)
	slots                  int    // slots a primary serves
	err                    error  // the node did not answer
}

func (m zoneMember) describe() string {
	switch {
	case m.err != nil:
		return fmt.Sprintf("%s@%s unreachable (%v)", m.pod, m.zone, m.err)
	case m.role == valkey.RolePrimary:
		return fmt.Sprintf("%s@%s primary of shard %s (%d slots)", m.pod, m.zone, m.shard, m.slots)
	default:
		return fmt.Sprintf("%s@%s %s of shard %s following %s", m.pod, m.zone, m.role, m.shard, m.primary)
	}
}

// zoneLayoutOf reads the layout now; down is the Kubernetes node that is stopped ("" for none).
func zoneLayoutOf(t testing.TB, vc *v1.ValkeyCluster, down string, zones []string) zoneLayout {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := K8s.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	zoneOf := map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	var l zoneLayout
	for _, z := range zones {
		if down == "" || zoneOf[down] != z {
			l.zones = append(l.zones, z)
		}
	}
	pods := LivePods(t, vc)
	var addrs []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		p := pods[name]
		m := zoneMember{pod: name, node: p.Spec.NodeName, zone: zoneOf[p.Spec.NodeName], shard: p.Labels[v1.LabelShard]}
		switch {
		case p.Status.Phase != corev1.PodRunning:
			why := string(p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					why += ": " + c.Message
				}
			}
			l.pending = append(l.pending, fmt.Sprintf("%s (shard %s, node %q) %s", name, m.shard, m.node, why))
		case m.node == down:
			l.down = append(l.down, m)
		default:
			l.members = append(l.members, m)
			addrs = append(addrs, PodAddr(p))
		}
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	views := valkey.Observe(vctx, addrs, Creds(t, vc))
	cancel()
	podOf := map[string]string{}
	for i, v := range views {
		m := &l.members[i]
		me, ok := v.Myself()
		if !v.Reachable || !ok {
			m.err = v.Err
			if m.err == nil {
				m.err = fmt.Errorf("no myself entry")
			}
			continue
		}
		m.id, m.role, m.primary = me.ID, me.Role, me.PrimaryID
		for _, r := range me.Slots {
			m.slots += r.End - r.Start + 1
		}
		podOf[me.ID] = m.pod
	}
	for i := range l.members {
		if p, ok := podOf[l.members[i].primary]; ok {
			l.members[i].primary = p
		}
	}
	return l
}

func (l zoneLayout) String() string {
	var b strings.Builder
	for _, z := range l.zones {
		fmt.Fprintf(&b, "\n  %s:", z)
		for _, m := range l.members {
			if m.zone == z {
				b.WriteString(" " + m.describe() + ";")
			}
		}
	}
	for _, m := range l.members {
		if !slices.Contains(l.zones, m.zone) {
			fmt.Fprintf(&b, "\n  outside the zones counted: %s", m.describe())
		}
	}
	for _, m := range l.down {
		fmt.Fprintf(&b, "\n  on the node down: %s@%s (shard %s)", m.pod, m.zone, m.shard)
	}
	for _, p := range l.pending {
		fmt.Fprintf(&b, "\n  not running: %s", p)
	}
	return b.String()
}

// shards groups the answering members by Valkey's replication: each primary serving slots with
// the replicas that follow it, by the primary's pod.
func (l zoneLayout) shards() map[string][]zoneMember {
	out := map[string][]zoneMember{}
	for _, m := range l.members {
		if m.err == nil && m.role == valkey.RolePrimary && m.slots > 0 {
			out[m.pod] = []zoneMember{m}
		}
	}
	for _, m := range l.members {
		if m.err == nil && m.role == valkey.RoleReplica {
			if _, ok := out[m.primary]; ok {
				out[m.primary] = append(out[m.primary], m)
			}
		}
	}
	return out
}

// shardZoneClashes names every shard (by Valkey's replication) with two live members in one zone.
func (l zoneLayout) shardZoneClashes() []string {
	var out []string
	shards := l.shards()
	for _, primary := range slices.Sorted(maps.Keys(shards)) {
		byZone := map[string][]string{}
		for _, m := range shards[primary] {
			byZone[m.zone] = append(byZone[m.zone], m.pod)
		}
		for _, z := range slices.Sorted(maps.Keys(byZone)) {
			if len(byZone[z]) > 1 {
				out = append(out, fmt.Sprintf("the shard of primary %s has %v in %s", primary, byZone[z], z))
			}
		}
	}
	return out
}

// primariesPerZone counts the primaries serving slots in each zone counted.
func (l zoneLayout) primariesPerZone() map[string]int {
	out := map[string]int{}
	for _, z := range l.zones {
		out[z] = 0
	}
	for _, members := range l.shards() {
		out[members[0].zone]++
	}
	return out
}

// spreadProblems is what keeps the layout from the spread the operator keeps over the zones up:
// every member answers and every replica follows a primary of its own shard label; each shard's
// members are in distinct zones; the pods per zone differ by at most one; no zone holds more than
// ceil(shards / zones) primaries.
func (l zoneLayout) spreadProblems(shards int) []string {
	var out []string
	shardOf := map[string]string{}
	for _, m := range l.members {
		shardOf[m.pod] = m.shard
	}
	for _, m := range l.members {
		switch {
		case m.err != nil:
			out = append(out, fmt.Sprintf("%s does not answer: %v", m.pod, m.err))
		case m.role == valkey.RoleReplica && shardOf[m.primary] != m.shard:
			out = append(out, fmt.Sprintf("%s (shard %s) follows %s (shard %q)", m.pod, m.shard, m.primary, shardOf[m.primary]))
		case !slices.Contains(l.zones, m.zone):
			out = append(out, fmt.Sprintf("%s runs in %q, not a zone counted", m.pod, m.zone))
		}
	}
	out = append(out, l.shardZoneClashes()...)
	perZone := map[string]int{}
	for _, z := range l.zones {
		perZone[z] = 0
	}
	for _, m := range l.members {
		perZone[m.zone]++
	}
	if lo, hi := slices.Min(slices.Collect(maps.Values(perZone))), slices.Max(slices.Collect(maps.Values(perZone))); hi-lo > 1 {
		out = append(out, fmt.Sprintf("pods per zone %v differ by more than one", perZone))
	}
	limit := ceilDiv(shards, len(l.zones))
	for z, n := range l.primariesPerZone() {
		if n > limit {
			out = append(out, fmt.Sprintf("%s holds %d primaries, more than ceil(%d/%d) = %d", z, n, shards, len(l.zones), limit))
		}
	}
	slices.Sort(out)
	return out
}

// zoneToStop returns the zone holding a primary with the fewest primaries (the first in order
// among equals), and its Kubernetes node.
func (l zoneLayout) zoneToStop() (zone, node string) {
	per := l.primariesPerZone()
	best := 0
	for _, z := range l.zones {
		if n := per[z]; n > 0 && (zone == "" || n < best) {
			zone, best = z, n
		}
	}
	for _, m := range l.members {
		if m.zone == zone {
			return zone, m.node
		}
	}
	return "", ""
}

// writerOpTimeout is the bound on one write of a writer started with opts (harness.StartWriter's
// default when unset).
func writerOpTimeout(opts WriterOptions) time.Duration {
	if opts.OpTimeout > 0 {
		return opts.OpTimeout
	}
	return time.Second
}

func ceilDiv(a, b int) int {
	if b <= 0 {
		return a
	}
	return (a + b - 1) / b
}
