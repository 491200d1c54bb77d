package chaos

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// outcome is one cluster's end of a run.
type outcome struct {
	// unscheduled lists the cluster's pods that died of something else than the schedule (a
	// liveness probe under load, say): losses after them are not the schedule's doing.
	unscheduled []string
	// dataLost counts the operator's "shard lost every copy" lines for the cluster.
	dataLost  int
	converged time.Duration
	problem   string // why it did not converge within ConvergeBound
	writes    harness.Report
	writeErr  string // the writer's read-back failed, or slots took no writes after convergence
}

// takesCopies tells the faults that can lose a node's unreplicated writes (its process dies or
// it is cut off and failed over) from the ones that cannot.
func takesCopies(k schedule.Kind) bool {
	switch k {
	case schedule.Kill, schedule.DeletePod, schedule.StopNode, schedule.CutNetwork, schedule.ZoneLoss:
		return true
	}
	return false
}

// report is the run's text: seed and replay command, the schedule, what each event did (when,
// to whom, the write errors after it, the writes lost to it), convergence, writers, verdict.
func (r *runner) report(wall time.Duration, outcomes map[string]*outcome, failures []string) string {
	var b strings.Builder
	replay := fmt.Sprintf("make chaos SEED=%d DURATION=%s", r.sched.Seed, r.sched.Duration)
	fmt.Fprintf(&b, "CHAOS REPORT seed %d, schedule %s, wall time %s\nreplay: %s\n\n", r.sched.Seed, r.sched.Duration, wall.Round(time.Second), replay)
	b.WriteString(r.sched.String())
	b.WriteString("\nevents as they happened: when it took effect, then the event as planned; write errors are the\n" +
		"writer's refused writes on the clusters it touched, from it to their next fault or change\n" +
		"(a pair's under its second fault):\n")
	evs := r.sortedFired()
	lost := r.attributeLosses(evs, outcomes)
	firedBy, notFired := map[schedule.Kind]int{}, map[schedule.Kind]int{}
	// The longest run of refused writes on one slot after each kind of event (a pair's under
	// its second fault), over every cluster.
	longestBy := map[string]time.Duration{}
	// managedOf is each event's longest refusal on one slot by cluster, for its baseline.
	managedOf := map[*fired]map[string]time.Duration{}
	for i, f := range evs {
		if f.at.IsZero() {
			notFired[f.ev.Kind]++
			fmt.Fprintf(&b, "  NOT FIRED  %s: %s\n", f.ev, f.note)
			continue
		}
		if f.ev.Kind.IsFault() {
			firedBy[f.ev.Kind]++
		}
		fmt.Fprintf(&b, "  +%-8s %s (%s)", offset(f.at.Sub(r.start)), f.ev, heldText(f.held))
		if len(f.pods) > 0 {
			fmt.Fprintf(&b, " pods %s", strings.Join(f.pods, " "))
		}
		if f.node != "" {
			fmt.Fprintf(&b, " node %s", f.node)
		}
		if !f.restored.IsZero() {
			fmt.Fprintf(&b, ", back at +%s", offset(f.restored.Sub(r.start)))
		}
		if f.note != "" {
			fmt.Fprintf(&b, " [%s]", f.note)
		}
		b.WriteString("\n")
		for _, name := range f.clusters {
			o := outcomes[name]
			if o == nil || f.ev.Kind == schedule.KillOperator || (f.ev.Pair != 0 && i+1 < len(evs) && evs[i+1].ev.Pair == f.ev.Pair) {
				// An operator kill stops no write by itself; a pair's errors are the second's.
				continue
			}
			end := r.nextOn(evs, i, name)
			label := string(f.ev.Kind)
			if f.ev.Pair != 0 {
				label = "pair"
			}
			d := longestRun(o.writes.Refusals, f.at.Add(-windowLead), end)
			if d > longestBy[label] {
				longestBy[label] = d
			}
			if managedOf[f] == nil {
				managedOf[f] = map[string]time.Duration{}
			}
			managedOf[f][name] = d
			if w := window(o.writes.Refusals, f.at.Add(-windowLead), end); w != "" {
				fmt.Fprintf(&b, "      %s write errors: %s\n", name, w)
			}
			for _, l := range r.twinLines(f, name) {
				fmt.Fprintf(&b, "      %s\n", l)
			}
			if l := lost[lostKey{i, name}]; l != [2]int{} {
				fmt.Fprintf(&b, "      %s writes lost to it: %d unreplicated, %d replicated\n", name, l[0], l[1])
			}
		}
	}
	b.WriteString("\nfaults fired by kind: ")
	for _, k := range []schedule.Kind{schedule.Kill, schedule.DeletePod, schedule.StopNode, schedule.ZoneLoss, schedule.CutNetwork, schedule.KillOperator} {
		fmt.Fprintf(&b, "%s %d", k, firedBy[k])
		if notFired[k] > 0 {
			fmt.Fprintf(&b, " (%d NOT FIRED)", notFired[k])
		}
		b.WriteString("; ")
	}
	b.WriteString("\nlongest write refusal on one slot by event kind: ")
	for _, k := range slices.Sorted(maps.Keys(longestBy)) {
		fmt.Fprintf(&b, "%s %s; ", k, longestBy[k].Round(100*time.Millisecond))
	}
	b.WriteString(r.baselineReport(longestBy, managedOf))
	b.WriteString("\n\nconvergence after the schedule (bound " + ConvergeBound.String() + "):\n")
	for _, c := range r.targets {
		o := outcomes[c.name]
		if o == nil {
			continue
		}
		if o.problem != "" {
			fmt.Fprintf(&b, "  %s: NOT CONVERGED after %s: %s\n", c.name, o.converged.Round(100*time.Millisecond), o.problem)
		} else {
			fmt.Fprintf(&b, "  %s: %s to %s\n", c.name, o.converged.Round(100*time.Millisecond), c.current())
		}
	}
	b.WriteString("\npods that died outside the schedule, and shards the operator served again empty:\n")
	for _, c := range r.targets {
		if o := outcomes[c.name]; o != nil {
			fmt.Fprintf(&b, "  %s: %d pods (%s); %d \"shard lost every copy of its data\" lines\n", c.name, len(o.unscheduled), strings.Join(o.unscheduled, "; "), o.dataLost)
		}
	}
	b.WriteString("\nwriters (WAIT 1 on one write in four; every acknowledged key read back at the end):\n")
	for _, c := range r.targets {
		o := outcomes[c.name]
		if o == nil {
			continue
		}
		fmt.Fprintf(&b, "  %s: %s", c.name, indent(o.writes.String()))
		if o.writeErr != "" {
			fmt.Fprintf(&b, "    WRITER PROBLEM: %s\n", o.writeErr)
		}
	}
	b.WriteString("\nwrites lost and why: a write acknowledged by WAIT 1 reached a replica and must survive the\n" +
		"loss of any one copy (the faults never take two copies of a shard at once); none may be lost.\n" +
		"A write its primary acknowledged alone (no WAIT sampled, or WAIT timed out) may be lost when that\n" +
		"primary crashes or is cut off before it replicates: Valkey replicates asynchronously, so these are\n" +
		"counted and attributed above to the first scheduled fault after the write, not failed. A pod that\n" +
		"died outside the schedule (listed above) may have taken them instead: the attribution is by time.\n")
	for _, c := range r.targets {
		if o := outcomes[c.name]; o != nil {
			fmt.Fprintf(&b, "  %s: %d replicated lost, %d unreplicated lost of %d acknowledged (%d replicated)\n",
				c.name, o.writes.LostReplicated, o.writes.LostUnreplicated, o.writes.Acked, o.writes.Replicated)
		}
	}
	if len(failures) == 0 {
		b.WriteString("\nRESULT: PASS\n")
	} else {
		fmt.Fprintf(&b, "\nRESULT: FAIL — replay with: %s\n", replay)
		for _, f := range failures {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	return b.String()
}

func offset(d time.Duration) string {
	return fmt.Sprintf("%02d:%04.1f", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// windowLead is how long before an event's recorded time its window of refused writes opens:
// the time is taken once the injection returned (a node stop takes a moment to stop its pods),
// and writes fail from the moment it begins.
const windowLead = 500 * time.Millisecond

// nextOn is when the window of evs[i] on cluster name ends: where the next fault or change
// touching it opens its own (an operator kill does not end a window: its writes go on), or two
// minutes on. Ending it there, not at the next event's recorded time, keeps a refusal that began
// as the next event was being injected out of this one's window (chaos seed 60606 on b5f3410: a
// node stop's 12.4 s counted under the replica deletion before it too).
func (r *runner) nextOn(evs []*fired, i int, name string) time.Time {
	for _, f := range evs[i+1:] {
		if !f.at.IsZero() && f.at.After(evs[i].at) && contains(f.clusters, name) && f.ev.Kind != schedule.KillOperator {
			return maxTime(evs[i].at, f.at.Add(-windowLead))
		}
	}
	return evs[i].at.Add(2 * time.Minute)
}

// window sums the refusal runs that began in [from, to): how many, how many writes, the span
// from the first's start to the last's end, and the longest run.
// longestRun is the longest run of refused writes on one slot that started in [from, to).
func longestRun(rs []harness.Refusal, from, to time.Time) time.Duration {
	var longest time.Duration
	for _, x := range rs {
		if !x.Start.Before(from) && x.Start.Before(to) {
			longest = max(longest, x.End.Sub(x.Start))
		}
	}
	return longest
}

func window(rs []harness.Refusal, from, to time.Time) string {
	var first, last time.Time
	var longest time.Duration
	runs, writes := 0, 0
	slots := map[int]bool{}
	lastErr := ""
	for _, x := range rs {
		if x.Start.Before(from) || !x.Start.Before(to) {
			continue
		}
		runs++
		writes += x.Writes
		slots[x.Slot] = true
		if first.IsZero() || x.Start.Before(first) {
			first = x.Start
		}
		if x.End.After(last) {
			last = x.End
		}
		if d := x.End.Sub(x.Start); d > longest {
			longest, lastErr = d, x.LastErr
		}
	}
	if runs == 0 {
		return ""
	}
	return fmt.Sprintf("%d refused on %d slots, window %s, longest run %s (%s)", writes, len(slots),
		last.Sub(first).Round(time.Millisecond), longest.Round(time.Millisecond), lastErr)
}

type lostKey struct {
	event   int
	cluster string
}

// attributeLosses puts each lost write on the first fault that could take copies of the
// writer's cluster after the write was acknowledged: [unreplicated, replicated].
func (r *runner) attributeLosses(evs []*fired, outcomes map[string]*outcome) map[lostKey][2]int {
	out := map[lostKey][2]int{}
	for name, o := range outcomes {
		for _, l := range o.writes.Lost {
			for i, f := range evs {
				if f.at.IsZero() || !takesCopies(f.ev.Kind) || !contains(f.clusters, name) || !f.at.After(l.AckedAt) {
					continue
				}
				v := out[lostKey{i, name}]
				if l.Replicated {
					v[1]++
				} else {
					v[0]++
				}
				out[lostKey{i, name}] = v
				break
			}
		}
	}
	return out
}

// unscheduled fills each outcome's pods that died of something the schedule did not do (their
// container terminated with a message, such as the kubelet's "liveness probe failed"), and the
// operator's log lines saying a shard lost every copy.
func (r *runner) unscheduled(ctx context.Context, outcomes map[string]*outcome) {
	logs, _ := os.ReadFile(op.logPath())
	for _, c := range r.targets {
		o := outcomes[c.name]
		if o == nil {
			continue
		}
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(c.ns)); err == nil {
			for _, p := range list.Items {
				if p.Labels[harness.TwinLabel] != "" {
					continue // a baseline's pod (baseline_test.go)
				}
				for _, cs := range p.Status.ContainerStatuses {
					if t := cs.State.Terminated; t != nil && strings.Contains(t.Message, "liveness") {
						o.unscheduled = append(o.unscheduled, fmt.Sprintf("%s %s at %s", p.Name, t.Message, t.FinishedAt.Format("15:04:05")))
					}
				}
			}
		}
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, "shard lost every copy") && strings.Contains(line, "/vc."+c.ns+"\"") {
				o.dataLost++
			}
		}
	}
}
