package chaos

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// The baseline: beside each cluster under test runs its twin (harness.Twin), the same Valkey
// pods (image, config, ACL, TLS, probes, hooks) formed by hand in the same namespace, pinned to
// the Kubernetes nodes its managed counterparts run on, with its own writer and no operator.
// Each fault of the schedule that hits a Valkey node (kill, delete-pod, cut-network, a pair) is
// injected into the twin too, at the same moment, on the twin's node of the same shard and role;
// a node stop or a zone loss stops the twin's pods on that node with the cluster's. The twin's
// longest run of refused writes on one slot is then what Valkey alone does with that fault, on
// the same machine under the same load (the twins' and their writers' included, on both sides):
// the report prints it beside the operator's, per event and per kind of fault.
//
// A twin does not heal: once its writer takes writes on every slot again (or after
// TwinBound), it is built again from the managed cluster as it is then (shape, image, config).
// A fault that comes while it is being rebuilt, or still down from the last one, has no
// baseline sample (said in the report).
//
// On by default for a long run (CHAOS_DURATION set, `make chaos`); CHAOS_BASELINE=1 or 0 turns it
// on or off for any run. The bounded run of `make test` leaves it off: it doubles the Valkey
// processes and writers on the machine.

// TwinBound bounds how long a twin's window is followed: a quorum loss never heals without an
// operator's TAKEOVER, and a twin still down is not a baseline for the next fault.
const TwinBound = time.Minute

// BaselineNoise is how much a window may differ between the two sides of one fault by chance:
// Valkey's own randomness (the failure detection's ping schedule, up to half
// cluster-node-timeout; the election's random 500–1000 ms delay) and the writer's resolution (a
// write every 50 ms, a hung one given up after 1 s). Measured with `make bench BENCH=Baseline`
// on faults where the operator does nothing on either side (a network cut of one primary of
// three, with and without full coverage): the managed window less the baseline's ranged from
// -1.6 s to +1.8 s over 8 pairs (docs/dev/benchmarks.md).
const BaselineNoise = 2 * time.Second

func baselineOn() bool {
	switch os.Getenv("CHAOS_BASELINE") {
	case "1":
		return true
	case "0":
		return false
	}
	return os.Getenv("CHAOS_DURATION") != ""
}

// baseline is one cluster's twin and what its faults cost.
type baseline struct {
	twin *harness.Twin

	mu      sync.Mutex
	ready   bool   // whole and not faulted since it was built
	busy    string // why it is not ready
	samples []*baseSample
}

// baseSample is one fault's cost on a twin.
type baseSample struct {
	fired   []*fired // the managed cluster's event (two for a pair)
	cluster string
	at      time.Time
	pods    []string
	longest time.Duration
	summary string // window() of the twin's refusals
	healed  time.Duration
	note    string // why there is no figure
	// unpaired says why the twin's window is not a like-for-like baseline of the managed one
	// (a node stop that took a primary from one side and none from the other): the window is
	// still measured, and the twin built again, but it is not paired in the report.
	unpaired string
}

// startTwins builds every cluster's twin, one after the other. A twin that cannot be built is
// left out (said in the report).
func (r *runner) startTwins(ctx context.Context) {
	r.baselines = map[string]*baseline{}
	if !baselineOn() {
		return
	}
	for _, c := range r.targets {
		b := &baseline{busy: "building"}
		r.baselines[c.name] = b
		opts, err := c.writerOptions(ctx)
		if err != nil {
			b.busy = "not built: " + err.Error()
			continue
		}
		t, err := harness.BuildTwin(ctx, harness.TwinOptions{K8s: k8s, Managed: c.vc, Name: "twin", CA: c.ca, Dialer: cluster.Dialer(),
			Writer: opts, Avoid: r.downNodes})
		if err != nil {
			b.busy = "not built: " + err.Error()
			r.logf("baseline of %s: %v", c.name, err)
			continue
		}
		b.twin, b.ready, b.busy = t, true, ""
		r.logf("baseline of %s: %s", c.name, t.Describe(ctx))
	}
}

// downNodes are the Kubernetes nodes a fault has stopped and not started again.
func (r *runner) downNodes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downNode == "" {
		return nil
	}
	return []string{r.downNode}
}

// twinTarget is a twin pod a fault is to hit, resolved before the managed cluster's fault is
// injected so that both are injected together. For a node stop it is a twin with pods on the
// node (which the stop hits by itself), with what the stop takes from each side.
type twinTarget struct {
	f    *fired
	b    *baseline
	pod  corev1.Pod
	note string

	cluster  string   // a node stop's: the twin's cluster
	onNode   []string // a node stop's: the twin's pods on the node
	unpaired string
}

// resolveTwins finds the twin pods that fs (one fault or a pair, resolved on the managed
// clusters in w) hit: the same shard index and role on the cluster's twin. A node stop hits the
// twins' pods on the node by itself; the twin's placement follows its managed cluster's at the
// twin's build, but failovers move primaries since, so the primaries each side has on the node
// are counted now, before the stop, and a stop that takes a different number from the two sides
// is measured but not paired.
func (r *runner) resolveTwins(ctx context.Context, w *world, fs []*fired) []twinTarget {
	var out []twinTarget
	for _, f := range fs {
		switch f.ev.Kind {
		case schedule.Kill, schedule.DeletePod, schedule.CutNetwork:
		case schedule.StopNode, schedule.ZoneLoss:
			out = append(out, r.resolveNodeTwins(ctx, w, f)...)
			continue
		default:
			continue
		}
		b := r.baselines[f.ev.Cluster]
		if b == nil {
			continue
		}
		tt := twinTarget{f: f, b: b}
		if f.ev.Role == schedule.Replica && len(fs) == 1 {
			// A replica's loss needs no failover: its twin would show no refusal and then be
			// rebuilt, busy when the next fault on a primary comes.
			tt.note = "no baseline: a replica's loss (the twin is kept for the primaries' faults)"
			out = append(out, tt)
			continue
		}
		b.mu.Lock()
		ready, busy := b.ready, b.busy
		b.mu.Unlock()
		if !ready {
			tt.note = "no baseline: the twin is " + busy
		} else if p, err := b.twin.Resolve(ctx, f.ev.Shard, f.ev.Role == schedule.Primary, f.ev.Pick); err != nil {
			tt.note = "no baseline: " + err.Error()
		} else {
			tt.pod = p
		}
		out = append(out, tt)
	}
	return out
}

// resolveNodeTwins are the twins with pods on the node f stops.
func (r *runner) resolveNodeTwins(ctx context.Context, w *world, f *fired) []twinTarget {
	var out []twinTarget
	for _, name := range slices.Sorted(maps.Keys(r.baselines)) {
		b := r.baselines[name]
		if b.twin == nil {
			continue
		}
		on, twinPrimaries, err := b.twin.OnNode(ctx, f.node)
		if err != nil || len(on) == 0 {
			continue
		}
		tt := twinTarget{f: f, b: b, cluster: name, onNode: on}
		if managed := w.primariesOn(name, f.node); managed != twinPrimaries {
			tt.unpaired = fmt.Sprintf("not paired: the stop took %d primaries from the twin, %d from the cluster", twinPrimaries, managed)
		}
		b.mu.Lock()
		if !b.ready {
			tt.note = "no baseline: the twin is " + b.busy
		}
		b.mu.Unlock()
		out = append(out, tt)
	}
	return out
}

// injectTwins injects the faults into the twins' pods, right after the managed ones, and follows
// each twin's window (a node stop's too: every twin with a pod on the node). A twin hit twice
// (a pair on one cluster) is followed once.
func (r *runner) injectTwins(ctx context.Context, fs []*fired, targets []twinTarget) {
	hit := map[*baseline]*baseSample{}
	sampleOf := func(b *baseline, cluster string) *baseSample {
		if s := hit[b]; s != nil {
			return s
		}
		s := &baseSample{cluster: cluster, at: time.Now()}
		hit[b] = s
		return s
	}
	for _, tt := range targets {
		if tt.onNode != nil {
			// A node stop: the runner stopped the twin's pods with the node.
			s := sampleOf(tt.b, tt.cluster)
			s.fired, s.pods = append(s.fired, tt.f), append(s.pods, tt.onNode...)
			if tt.note != "" && s.note == "" {
				s.note = tt.note
			}
			if tt.unpaired != "" {
				s.unpaired = tt.unpaired
			}
			continue
		}
		s := sampleOf(tt.b, tt.f.ev.Cluster)
		s.fired = append(s.fired, tt.f)
		if tt.note != "" {
			s.note = tt.note
			continue
		}
		var err error
		switch tt.f.ev.Kind {
		case schedule.Kill:
			err = cluster.Kubelet.KillPod(tt.pod.Namespace, tt.pod.Name)
		case schedule.DeletePod:
			if err = k8s.Delete(ctx, &corev1.Pod{ObjectMeta: tt.pod.ObjectMeta}); apierrors.IsNotFound(err) {
				err = nil
			}
		case schedule.CutNetwork:
			err = cluster.Kubelet.CutPodNetwork(tt.pod.Namespace, tt.pod.Name)
		}
		s.pods = append(s.pods, tt.pod.Name)
		if err != nil {
			s.note = "twin fault: " + err.Error()
		}
	}
	for b, s := range hit {
		b.mu.Lock()
		b.samples = append(b.samples, s)
		follow := b.ready && s.note == ""
		if follow {
			b.ready, b.busy = false, fmt.Sprintf("down from the fault at +%s", offset(s.at.Sub(r.start)))
		}
		b.mu.Unlock()
		if follow {
			r.twins.Add(1)
			go func() {
				defer r.twins.Done()
				r.followTwin(ctx, b, s)
			}()
		}
	}
}

// followTwin waits until the twin takes writes on every slot again after s's fault (after the
// fault's restore, for a cut or a stopped node), records its window, and builds the twin again.
func (r *runner) followTwin(ctx context.Context, b *baseline, s *baseSample) {
	var restoreAt time.Time
	restored := make(chan struct{})
	for _, f := range s.fired {
		if f.ev.Kind == schedule.CutNetwork || f.ev.Kind == schedule.StopNode || f.ev.Kind == schedule.ZoneLoss {
			restoreAt = maxTime(restoreAt, s.at.Add(f.ev.For))
		}
	}
	// The cut twin pods get their network back with the cluster's (the runner restores only the
	// pods it cut on the managed side), whether the twin took writes again meanwhile or not.
	go func() {
		defer close(restored)
		time.Sleep(time.Until(restoreAt))
		for _, f := range s.fired {
			if f.ev.Kind == schedule.CutNetwork {
				for _, p := range s.pods {
					_ = cluster.Kubelet.RestorePodNetwork(b.twin.Namespace, p)
				}
			}
		}
	}()
	_ = b.twin.Writer.WaitAcked(3, TwinBound)
	end := time.Now()
	s.healed = end.Sub(s.at)
	if s.healed >= TwinBound {
		s.note = fmt.Sprintf("not taking writes on every slot %s after the fault", TwinBound)
	}
	rs := b.twin.Writer.Refusals()
	s.longest = longestRun(rs, s.at.Add(-windowLead), end)
	s.summary = window(rs, s.at.Add(-windowLead), end)
	<-restored
	r.mu.Lock()
	ending := r.ending
	r.mu.Unlock()
	b.mu.Lock()
	b.busy = "being built again"
	if ending {
		b.busy = "done: the schedule ended"
	}
	b.mu.Unlock()
	if ending {
		return
	}
	// Built again until it stands (a node stopped meanwhile, a pod that did not start), while the
	// schedule runs.
	c := r.byName[s.cluster]
	for {
		opts, err := c.writerOptions(ctx)
		if err == nil {
			err = b.twin.Rebuild(ctx, opts)
		}
		if err == nil {
			break
		}
		r.logf("baseline of %s not rebuilt, again in 10 s: %v", s.cluster, err)
		b.mu.Lock()
		b.busy = "being built again (last try: " + err.Error() + ")"
		b.mu.Unlock()
		time.Sleep(10 * time.Second)
		r.mu.Lock()
		ending := r.ending
		r.mu.Unlock()
		if ending {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ready, b.busy = true, ""
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// endTwins lets the twins' last windows close (no twin is built again from now on) and deletes
// the twins, so that the clusters converge without them beside.
func (r *runner) endTwins(ctx context.Context) {
	r.mu.Lock()
	r.ending = true
	r.mu.Unlock()
	r.twins.Wait()
	r.stopTwins(ctx)
}

// stopTwins deletes the twins.
func (r *runner) stopTwins(ctx context.Context) {
	for _, b := range r.baselines {
		if b.twin != nil {
			b.twin.Delete(ctx)
		}
	}
}

// twinLines are the baseline's lines under the managed event evs[i] for cluster name.
func (r *runner) twinLines(f *fired, name string) []string {
	b := r.baselines[name]
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.samples {
		if !slices.Contains(s.fired, f) || s.cluster != name {
			continue
		}
		// A pair's sample shows under its second event, as the managed writer's errors do.
		if len(s.fired) > 1 && s.fired[len(s.fired)-1] != f {
			return nil
		}
		switch {
		case s.note != "" && s.summary == "":
			return []string{fmt.Sprintf("%s baseline (twin): %s", name, s.note)}
		case s.summary == "" && s.unpaired != "":
			return []string{fmt.Sprintf("%s baseline (twin %s): no write refused; %s", name, strings.Join(s.pods, " "), s.unpaired)}
		case s.summary == "":
			return []string{fmt.Sprintf("%s baseline (twin %s): no write refused", name, strings.Join(s.pods, " "))}
		default:
			line := fmt.Sprintf("%s baseline (twin %s): %s", name, strings.Join(s.pods, " "), s.summary)
			if s.note != "" {
				line += "; " + s.note
			}
			if s.unpaired != "" {
				line += "; " + s.unpaired
			}
			return []string{line}
		}
	}
	return nil
}

// baselineReport is the per-kind comparison: for each kind of fault, the longest refusal on one
// slot of the managed clusters beside their twins', and the worst pairing (one fault's managed
// window less its twin's). longestBy and pairs come from the report's walk over the events.
func (r *runner) baselineReport(longestBy map[string]time.Duration, managedOf map[*fired]map[string]time.Duration) string {
	if len(r.baselines) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nlongest write refusal on one slot by fault kind, managed beside its baseline (a twin of the same\n"+
		"Valkey pods without the operator, faulted at the same moment; noise %s, see BaselineNoise):\n", BaselineNoise)
	type agg struct {
		baseline     time.Duration
		samples, off int
		unpaired     int           // measured but not like for like (see baseSample.unpaired)
		worst        time.Duration // max managed - baseline over paired samples
		worstAt      string
		paired       bool
	}
	kinds := map[string]*agg{}
	for _, name := range slices.Sorted(maps.Keys(r.baselines)) {
		bl := r.baselines[name]
		bl.mu.Lock()
		for _, s := range bl.samples {
			label := string(s.fired[0].ev.Kind)
			if s.fired[0].ev.Pair != 0 {
				label = "pair"
			}
			a := kinds[label]
			if a == nil {
				a = &agg{}
				kinds[label] = a
			}
			if s.summary == "" && s.note != "" {
				a.off++
				continue
			}
			a.samples++
			a.baseline = max(a.baseline, s.longest)
			if s.unpaired != "" {
				a.unpaired++
				continue
			}
			last := s.fired[len(s.fired)-1]
			if m, ok := managedOf[last][name]; ok {
				if d := m - s.longest; !a.paired || d > a.worst {
					a.worst, a.paired = d, true
					a.worstAt = fmt.Sprintf("%s +%s: managed %s, baseline %s", name, offset(last.at.Sub(r.start)), m.Round(100*time.Millisecond), s.longest.Round(100*time.Millisecond))
				}
			}
		}
		bl.mu.Unlock()
	}
	for _, label := range slices.Sorted(maps.Keys(longestBy)) {
		a := kinds[label]
		if a == nil {
			continue
		}
		verdict := "within noise"
		if a.paired && a.worst > BaselineNoise {
			verdict = "WORSE THAN ITS BASELINE"
		}
		pairing := fmt.Sprintf("worst pairing %s (%s): %s", signed(a.worst), a.worstAt, verdict)
		if !a.paired {
			pairing = "no pairing like for like"
		}
		fmt.Fprintf(&b, "  %-12s managed %6s, baseline %6s (%d samples, %d without, %d not paired); %s\n", label,
			longestBy[label].Round(100*time.Millisecond), a.baseline.Round(100*time.Millisecond), a.samples, a.off, a.unpaired, pairing)
	}
	return b.String()
}

// signed prints d with its sign, to a tenth of a second.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.Round(100*time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
