package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// FormBound bounds the three clusters' first formation, side by side (6–10 s each when idle;
// this machine is shared with tests/e2e and benchmarks).
const FormBound = 5 * time.Minute

// fired is what became of one event.
type fired struct {
	ev      schedule.Event
	planned time.Time
	at      time.Time // when it took effect; zero if it was not fired
	held    time.Duration
	pods    []string // the victims (namespace/name)
	node    string
	note    string // what went wrong, or why it was not fired
	// clusters are the clusters the event touched (a node stop: every cluster with a pod on it;
	// an operator kill: all), for the refusal windows and the attribution of lost writes.
	clusters []string
	restored time.Time
}

// runner drives one seed's run.
type runner struct {
	sched   schedule.Schedule
	targets []*target
	byName  map[string]*target
	start   time.Time
	logf    func(format string, args ...any)

	mu       sync.Mutex
	fired    []*fired
	nodeDown bool
	downNode string // the node stopped now, "" when none
	// inject serialises the check of a fault's safety with its injection, so two faults that
	// fire together never both see a shard as safe.
	inject sync.Mutex
	wg     sync.WaitGroup

	// baselines are the clusters' twins (baseline_test.go), by cluster name; twins counts the
	// goroutines following their faults, ending once the schedule has.
	baselines map[string]*baseline
	twins     sync.WaitGroup
	ending    bool
}

func newRunner(sched schedule.Schedule, prefix string, logf func(string, ...any)) *runner {
	r := &runner{sched: sched, byName: map[string]*target{}, logf: logf}
	for _, c := range sched.Clusters {
		ns := prefix + "-" + c.Name
		t := &target{name: c.Name, ns: ns, config: ns + "-config", image8: ns + "-v8", image9: ns + "-v9", spec: c}
		r.targets = append(r.targets, t)
		r.byName[c.Name] = t
	}
	return r
}

// setup creates every cluster, waits until each is Ready and Valkey agrees, and starts the
// writers.
func (r *runner) setup(ctx context.Context) error {
	if err := ensureRole(ctx); err != nil {
		return err
	}
	for _, c := range r.targets {
		if err := c.create(ctx, r.sched.Seed); err != nil {
			return err
		}
	}
	for _, c := range r.targets {
		if _, problem := r.waitConverged(ctx, c, FormBound); problem != "" {
			return fmt.Errorf("%s never formed within %s: %s", c.name, FormBound, problem)
		}
	}
	if w, err := r.observe(ctx); err == nil {
		var placement []string
		for _, n := range []string{"node-a", "node-b", "node-c"} {
			placement = append(placement, fmt.Sprintf("%s %d pods", n, len(w.onNode(n))))
		}
		r.logf("formed; placement: %s", strings.Join(placement, ", "))
	}
	for _, c := range r.targets {
		opts, err := c.writerOptions(ctx)
		if err != nil {
			return err
		}
		w, err := harness.StartWriter(opts)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		c.writer, c.wopts = w, opts
		if err := w.WaitAcked(20, time.Minute); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	r.startTwins(ctx)
	return nil
}

// execute plays the schedule: each event (a pair as one) in its own goroutine at its offset, so a
// fault held back never delays the ones after it; then waits for every held fault, node start,
// network restore and operator restart.
func (r *runner) execute(ctx context.Context) {
	r.start = time.Now()
	evs := r.sched.Events
	for i := 0; i < len(evs); {
		n := 1
		for evs[i].Pair != 0 && i+n < len(evs) && evs[i+n].Pair == evs[i].Pair {
			n++
		}
		group := evs[i : i+n]
		i += n
		if d := time.Until(r.start.Add(group[0].At)); d > 0 {
			time.Sleep(d)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if group[0].Kind.IsFault() {
				r.fault(ctx, group)
			} else {
				r.change(ctx, group[0])
			}
		}()
	}
	r.wg.Wait()
}

func (r *runner) record(f *fired) {
	r.mu.Lock()
	r.fired = append(r.fired, f)
	r.mu.Unlock()
	switch {
	case f.at.IsZero():
		r.logf("NOT FIRED %s: %s", f.ev, f.note)
	case f.note != "":
		r.logf("fired %s at +%s (%s) %s %s: %s", f.ev, f.at.Sub(r.start).Round(100*time.Millisecond), heldText(f.held), strings.Join(f.pods, ","), f.node, f.note)
	default:
		r.logf("fired %s at +%s (%s) %s %s", f.ev, f.at.Sub(r.start).Round(100*time.Millisecond), heldText(f.held), strings.Join(f.pods, ","), f.node)
	}
}

func heldText(d time.Duration) string {
	if d < time.Second {
		return "on time"
	}
	return "held " + d.Round(100*time.Millisecond).String()
}

// fault fires one fault or a pair once they are safe (HoldBound), and schedules the restores.
func (r *runner) fault(ctx context.Context, group []schedule.Event) {
	planned := r.start.Add(group[0].At)
	if group[0].Kind == schedule.KillOperator {
		f := &fired{ev: group[0], planned: planned, at: time.Now(), clusters: r.names()}
		r.record(f)
		if err := op.restart(group[0].For); err != nil {
			f.note = err.Error()
		}
		f.restored = time.Now()
		return
	}
	var fs []*fired
	for _, e := range group {
		fs = append(fs, &fired{ev: e, planned: planned})
	}
	deadline := time.Now().Add(HoldBound)
	for {
		why := r.tryInject(ctx, fs)
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			for _, f := range fs {
				f.note = "held back " + HoldBound.String() + " and not fired: " + why
				r.record(f)
			}
			return
		}
		time.Sleep(time.Second)
	}
	for _, f := range fs {
		f.held = f.at.Sub(planned)
		r.record(f)
	}
	for _, f := range fs {
		switch f.ev.Kind {
		case schedule.StopNode, schedule.ZoneLoss:
			r.after(f.ev.For, func() {
				if err := cluster.Kubelet.StartNode(f.node); err != nil {
					f.note = "start node: " + err.Error()
				}
				f.restored = time.Now()
				r.mu.Lock()
				r.nodeDown, r.downNode = false, ""
				r.mu.Unlock()
			})
		case schedule.CutNetwork:
			r.after(f.ev.For, func() {
				ns, name, _ := strings.Cut(f.pods[0], "/")
				if err := cluster.Kubelet.RestorePodNetwork(ns, name); err != nil {
					// The operator may have replaced the pod meanwhile: nothing left to restore.
					f.note = "restore: " + err.Error()
				}
				f.restored = time.Now()
			})
		}
	}
}

// after runs fn after d, counted in the run's wait group.
func (r *runner) after(d time.Duration, fn func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		time.Sleep(d)
		fn()
	}()
}

func (r *runner) names() []string {
	var out []string
	for _, c := range r.targets {
		out = append(out, c.name)
	}
	return out
}

// tryInject resolves the faults' targets now, checks that losing them all at once is safe, and
// injects them; it returns why not otherwise.
func (r *runner) tryInject(ctx context.Context, fs []*fired) string {
	r.inject.Lock()
	defer r.inject.Unlock()
	w, err := r.observe(ctx)
	if err != nil {
		return err.Error()
	}
	var victims []string
	for _, f := range fs {
		var p corev1.Pod
		if f.ev.Kind == schedule.ZoneLoss {
			var why string
			if p, why = w.zoneLossTarget(); why != "" {
				return why
			}
		} else {
			var why string
			if p, why = w.resolve(f.ev); why != "" {
				return f.ev.Cluster + ": " + why
			}
		}
		f.pods, f.clusters = []string{podID(p)}, []string{f.ev.Cluster}
		if f.ev.Kind == schedule.StopNode || f.ev.Kind == schedule.ZoneLoss {
			r.mu.Lock()
			down := r.nodeDown
			r.mu.Unlock()
			if down {
				return "another node is stopped (one at a time: two of three down leave every shard's pods on one node)"
			}
			f.node = p.Spec.NodeName
			f.pods = w.onNode(f.node)
			f.clusters = nil
			for _, id := range f.pods {
				ns, _, _ := strings.Cut(id, "/")
				for _, c := range r.targets {
					if c.ns == ns && !contains(f.clusters, c.name) {
						f.clusters = append(f.clusters, c.name)
					}
				}
			}
		}
		victims = append(victims, f.pods...)
	}
	if why := w.safe(victims); why != "" {
		return why
	}
	twins := r.resolveTwins(ctx, w, fs)
	defer r.injectTwins(ctx, fs, twins) // right after the faults below
	for _, f := range fs {
		p, _ := w.podByID(f.pods[0])
		var err error
		switch f.ev.Kind {
		case schedule.Kill:
			err = cluster.Kubelet.KillPod(p.Namespace, p.Name)
		case schedule.DeletePod:
			err = k8s.Delete(ctx, &corev1.Pod{ObjectMeta: p.ObjectMeta})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		case schedule.CutNetwork:
			err = cluster.Kubelet.CutPodNetwork(p.Namespace, p.Name)
		case schedule.StopNode, schedule.ZoneLoss:
			r.mu.Lock()
			r.nodeDown, r.downNode = true, f.node
			r.mu.Unlock()
			err = cluster.Kubelet.StopNode(f.node)
		}
		f.at = time.Now()
		if err != nil {
			f.note = err.Error()
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// change applies one day-2 change.
func (r *runner) change(ctx context.Context, e schedule.Event) {
	c := r.byName[e.Cluster]
	f := &fired{ev: e, planned: r.start.Add(e.At), at: time.Now(), clusters: []string{c.name}}
	var err error
	switch e.Kind {
	case schedule.Upgrade:
		err = c.updateConfig(ctx, func(cfg *v1.ValkeyConfig) { cfg.Spec.ImageRef = c.image9 })
		c.mu.Lock()
		c.spec.Version = schedule.Valkey9
		c.mu.Unlock()
	case schedule.Config:
		// tcp-backlog needs a restart, so the change rolls every node as the schedule means;
		// hz itself now applies live (liveconf) and would replace nothing.
		err = c.updateConfig(ctx, func(cfg *v1.ValkeyConfig) { cfg.Spec.Valkey["tcp-backlog"] = fmt.Sprint(500 + e.Value) })
		c.mu.Lock()
		c.spec.Hz = e.Value
		c.mu.Unlock()
	case schedule.Shards:
		err = c.update(ctx, func(vc *v1.ValkeyCluster) { vc.Spec.Shards = int32(e.Value) })
		c.mu.Lock()
		c.spec.Shards = e.Value
		c.mu.Unlock()
	case schedule.Replicas:
		err = c.update(ctx, func(vc *v1.ValkeyCluster) { vc.Spec.ReplicasPerShard = int32(e.Value) })
		c.mu.Lock()
		c.spec.Replicas = e.Value
		c.mu.Unlock()
	case schedule.RotateCert:
		var crt, key []byte
		if crt, key, err = c.ca.Leaf(harness.ServiceHost(c.vc), harness.LeafOptions{}); err == nil {
			err = c.updateSecret(ctx, harness.TLSSecretData(crt, key, c.ca))
			c.mu.Lock()
			c.cert = crt
			c.mu.Unlock()
		}
	case schedule.RotatePassword:
		f.note, err = r.rotatePassword(ctx, c)
	}
	if err != nil {
		f.note = strings.TrimSpace(f.note + " " + err.Error())
	}
	r.record(f)
}

// PasswordBound bounds how long a rotation waits for every running node to accept the new
// password before the writer moves to it: the ACL controller acts at once on the Secret change
// (0.1–2.1 s measured), with room for nodes being replaced under faults.
const PasswordBound = time.Minute

// rotatePassword rotates the ACL user's password as the README says an application does: the
// new digest beside the old, the clients moved once every node accepts the new one, then the old
// digest removed. A node not enforcing within PasswordBound is noted, and the rotation goes on
// (the final check demands the new password everywhere).
func (r *runner) rotatePassword(ctx context.Context, c *target) (string, error) {
	c.mu.Lock()
	c.rotation++
	old, next := c.password, fmt.Sprintf("seed-%d-pw-%d", r.sched.Seed, c.rotation)
	c.mu.Unlock()
	if err := c.update(ctx, func(vc *v1.ValkeyCluster) { vc.Spec.ACL = []v1.ACLBinding{c.binding(old, next)} }); err != nil {
		return "", err
	}
	note := ""
	if why := waitAuth(ctx, c, next, PasswordBound); why != "" {
		note = "new password not on every node within " + PasswordBound.String() + ": " + why
	}
	c.writer.SetPassword(next)
	c.mu.Lock()
	c.password, c.retired = next, append(c.retired, old)
	c.mu.Unlock()
	return note, c.update(ctx, func(vc *v1.ValkeyCluster) { vc.Spec.ACL = []v1.ACLBinding{c.binding(next)} })
}

// waitAuth waits until every running node of c accepts aclUser with pw, and says why not.
func waitAuth(ctx context.Context, c *target, pw string, bound time.Duration) string {
	deadline := time.Now().Add(bound)
	for {
		why := authEverywhere(ctx, c, pw, true)
		if why == "" || time.Now().After(deadline) {
			return why
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// authEverywhere says why some running node does not accept (want) or refuse (!want) aclUser
// with pw, "" when none.
func authEverywhere(ctx context.Context, c *target, pw string, want bool) string {
	pods, err := c.pods(ctx)
	if err != nil {
		return err.Error()
	}
	for _, p := range pods {
		err := auth(ctx, harness.PodAddr(p), pw)
		switch {
		case want && err != nil:
			return fmt.Sprintf("%s: %v", p.Name, err)
		case !want && err == nil:
			return fmt.Sprintf("%s accepts a retired password", p.Name)
		case !want && !strings.Contains(err.Error(), "WRONGPASS"):
			return fmt.Sprintf("%s: %v, want WRONGPASS", p.Name, err)
		}
	}
	return ""
}

// auth connects to one node as aclUser with pw and PINGs.
func auth(ctx context.Context, addr, pw string) error {
	cl, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr}, Username: aclUser, Password: pw,
		ForceSingleClient: true, DisableCache: true, DisableRetry: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return cl.Do(ctx, cl.B().Ping().Build()).Error()
}

// sortedFired returns the events in the order they took effect (not fired last, by plan).
func (r *runner) sortedFired() []*fired {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]*fired(nil), r.fired...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].at, out[j].at
		if a.IsZero() {
			a = out[i].planned.Add(HoldBound)
		}
		if b.IsZero() {
			b = out[j].planned.Add(HoldBound)
		}
		return a.Before(b)
	})
	return out
}
