package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

const (
	// fleetNamespace holds BenchmarkFleet's clusters (apart from BenchmarkScale100's, so that
	// both can run in one process).
	fleetNamespace = "bench-fleet"
	// defaultFleetSizes is the curve BenchmarkFleet draws unless FLEET_SIZES says otherwise.
	defaultFleetSizes = "100,250,500"
	// fleetCuts is how many clusters' networks are cut, one after the other, at each size.
	fleetCuts = 3
)

// BenchmarkFleet runs a growing fleet of 1x0 clusters in one operator and, at each size of
// FLEET_SIZES (comma-separated, default 100,250,500; each larger than the one before), reports
// with the size after an @:
//   - s/ready@N: from creating the clusters that grow the fleet to N until all N are Ready
//     (from none for the first size);
//   - the steady state over steadyTicks active ticks, as measureSteady measures it.
//
// What bounds the fleet on the local cluster (one pod per 1x0 cluster): its three Nodes take
// 250 pods each (750), a Linux bridge takes at most 1 024 ports (one veth per pod, so about
// 1 000 pods per local cluster), each pod is a valkey-server process (~8 MB, so 500 take
// ~4 GB) with its own network namespace, and all of them, the control plane and the operator
// share the machine's cores. 500 is what a 2-core machine holds beside another test run.
//
// The fleet is built once per process; the framework's b.N only repeats the report. With
// FLEET_BASELINE_BINARY (an operator built from another commit) each size is measured again under
// that binary, reported with -baseline after the size: a before and after at one load, without
// forming the fleet twice.
// Run: make bench BENCH=Fleet (3 reports of one measurement), or
// FLEET_SIZES=100,250 go test -run '^$' -bench Fleet -benchtime 1x -timeout 90m ./tests/bench/
func BenchmarkFleet(b *testing.B) {
	if fleetSetup == nil {
		runAsAuditedUser(b)
		fleetSetup = map[string]float64{}
		f := fleet{ns: fleetNamespace}
		for _, n := range fleetSizes(b) {
			start := time.Now()
			growFleet(b, f, n)
			f.size = n
			fleetSetup[fmt.Sprintf("s/ready@%d", n)] = time.Since(start).Seconds()
			for unit, v := range measureSteady(b, f) {
				fleetSetup[fmt.Sprintf("%s@%d", unit, n)] = v
			}
			if base := os.Getenv("FLEET_BASELINE_BINARY"); base != "" {
				// The same fleet, at the same load, under another build of the operator.
				switchOperator(b, base)
				for unit, v := range measureSteady(b, f) {
					fleetSetup[fmt.Sprintf("%s@%d-baseline", unit, n)] = v
				}
				switchOperator(b, harness.OperatorBinary)
			}
		}
	}
	for range b.N {
		for unit, v := range fleetSetup {
			b.ReportMetric(v, unit)
		}
	}
}

// fleetSetup holds BenchmarkFleet's figures, measured once per process.
var fleetSetup map[string]float64

// fleetSizes reads FLEET_SIZES.
func fleetSizes(b *testing.B) []int {
	b.Helper()
	return growingSizes(b, "FLEET_SIZES", defaultFleetSizes)
}

// growingSizes reads the comma-separated sizes of env (def when unset): positive, each larger
// than the one before.
func growingSizes(b *testing.B, env, def string) []int {
	b.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		raw = def
	}
	var sizes []int
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			b.Fatalf("%s=%q: want growing positive sizes, e.g. %s", env, raw, def)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// growFleet creates clusters vc-<f.size> … vc-<n-1> of 1x0 in f's namespace and waits until
// all n are Ready.
func growFleet(b *testing.B, f fleet, n int) {
	b.Helper()
	ctx := context.Background()
	if err := ensureNS(ctx, f.ns); err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{harness.NewImage("scale-image"), harness.NewConfig("scale-config", "scale-image")} {
		if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	for i := f.size; i < n; i++ {
		vc := harness.NewCluster(f.ns, fmt.Sprintf("vc-%03d", i), "scale-config", harness.WithShards(1), harness.WithReplicas(0))
		if err := harness.K8s.Create(ctx, vc); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	waitFleetReady(b, fleet{ns: f.ns, size: n}, nil, 20*time.Minute, nil)
}

// switchOperator replaces the running operator with bin, as the audited user.
func switchOperator(b *testing.B, bin string) {
	b.Helper()
	kubeconfig, err := harness.Cluster.UserKubeconfig(localcluster.AuditedUser, "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	harness.Op.Kill(syscall.SIGTERM)
	if harness.Op, err = harness.StartOperator(bin, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info", "KUBECONFIG="+kubeconfig); err != nil {
		b.Fatal(err)
	}
	b.Logf("operator now %s", bin)
}

// auditedOperator is set once the operator runs as localcluster.AuditedUser.
var auditedOperator bool

// runAsAuditedUser restarts the operator as localcluster.AuditedUser (in group system:masters,
// so it needs no RBAC here): the API server's audit log records that user's requests, and so
// says what the operator asks of it, by verb and resource, apart from the benchmark's own
// requests and every other client's. apiserver_request_total has no label for the client.
func runAsAuditedUser(b *testing.B) {
	b.Helper()
	if auditedOperator {
		return
	}
	kubeconfig, err := harness.Cluster.UserKubeconfig(localcluster.AuditedUser, "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	harness.Op.Kill(syscall.SIGTERM) // releases the lease: the next one leads at once
	if harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info", "KUBECONFIG="+kubeconfig); err != nil {
		b.Fatal(err)
	}
	auditedOperator = true
}

// measureSteady watches the operator for steadyTicks ticks of f, settled, and returns:
//   - writes/tick: the API writes the operator makes (countOperatorWrites), per 30 s tick;
//   - MB-rss (max of the samples) and cpu-% (of one core), from /proc/<pid>;
//   - s/tick-interval-mean and -max: the `active tick` heartbeats' intervals;
//   - api-reads/s and api-writes/s: the operator's requests as the API server's audit log
//     records them (get, list, watch; create, update, patch, delete);
//   - valkey-cmds/s: the commands the fleet's nodes executed, from INFO commandstats before
//     and after, less the liveness probes' AUTH and PING and the benchmark's own INFO;
//   - bytes/scrape and series/scrape: one Prometheus scrape of the operator;
//   - s/cut-noticed-mean and -max: after the window, fleetCuts clusters' networks cut one
//     after the other, each until its Ready condition turns False (cutNoticed).
func measureSteady(b *testing.B, f fleet) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	// Let the passes that formation scheduled run out first.
	time.Sleep(controllers.TickInterval)
	cmds := fleetCommandStats(b, f)
	defer cmds.close()
	window := time.Duration(steadyTicks)*controllers.TickInterval + 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	writes := countOperatorWrites(ctx, b, f.ns)
	// A Prometheus's scrape every 15 s is part of the steady state: its cost is in the figures.
	token, err := harness.MetricsReaderToken(ctx, harness.K8s)
	if err != nil {
		b.Fatal(err)
	}
	var scrapeBytes, scrapeSeries int
	nextScrape := time.Now()
	pid := harness.Op.Pid()
	auditFrom := fileSize(b, harness.Cluster.AuditLog)
	calls0 := cmds.calls(b)
	stopProfile := profileOperator(b, fmt.Sprintf("steady-%d", f.size))
	defer stopProfile()
	cpu0, start := procCPU(b, pid), time.Now()
	var rssMax float64
	for ctx.Err() == nil {
		rssMax = max(rssMax, procRSS(b, pid))
		if time.Now().After(nextScrape) {
			scrapeBytes, scrapeSeries = scrapeSize(b, harness.Op.MetricsAddr, token)
			nextScrape = nextScrape.Add(15 * time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	elapsed := time.Since(start)
	cpu := procCPU(b, pid) - cpu0
	perNode, answered := commandsPerNode(calls0, cmds.calls(b))
	calls := perNode * float64(f.size) // the nodes that did not answer counted as the others
	reads, writesAPI, byCall := auditedRequests(b, harness.Cluster.AuditLog, auditFrom, start, start.Add(elapsed))
	n := writes()
	mean, worst, count := tickIntervals(b, f.ns, start, start.Add(elapsed))
	b.Logf("%d clusters, steady state over %s (load %s): %d operator writes, RSS max %.1f MB, CPU %.2f s; %d tick intervals, mean %.2f s, max %.2f s; API %d reads, %d writes; %.0f Valkey commands (%d nodes of %d counted); a scrape %d bytes, %d series",
		f.size, elapsed.Round(time.Second), loadAvg(), n, rssMax, cpu.Seconds(), count, mean, worst, reads, writesAPI, calls, answered, f.size, scrapeBytes, scrapeSeries)
	b.Logf("the operator's API requests by verb and resource (per s): %s", topCalls(byCall, elapsed))
	ticks := elapsed.Seconds() / controllers.TickInterval.Seconds()
	out["writes/tick"] = float64(n) / ticks
	out["MB-rss"] = rssMax
	out["cpu-%"] = 100 * cpu.Seconds() / elapsed.Seconds()
	out["s/tick-interval-mean"] = mean
	out["s/tick-interval-max"] = worst
	out["api-reads/s"] = float64(reads) / elapsed.Seconds()
	out["api-writes/s"] = float64(writesAPI) / elapsed.Seconds()
	out["valkey-cmds/s"] = calls / elapsed.Seconds()
	out["bytes/scrape"] = float64(scrapeBytes)
	out["series/scrape"] = float64(scrapeSeries)
	var sum, most float64
	for i := range fleetCuts {
		d := cutNoticed(b, f, fmt.Sprintf("vc-%03d", i)).Seconds()
		sum += d
		most = max(most, d)
	}
	out["s/cut-noticed-mean"] = sum / fleetCuts
	out["s/cut-noticed-max"] = most
	return out
}

// loadAvg is the machine's load average (1, 5, 15 min), to print beside every figure.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:3], " ")
}

// fileSize is the size of path, 0 when it does not exist yet.
func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// fleetMember is the name of a fleet's cluster (vc-000, vc-001, …) at the start of an object's.
var fleetMember = regexp.MustCompile(`^vc-[0-9]+`)

// auditEvent is the part of an audit log line that auditedRequests reads.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// auditedRequests counts the requests of localcluster.AuditedUser (the operator, see
// runAsAuditedUser) that the API server logged from offset on and that were received within
// [from, to]: reads (get, list, watch) and writes (everything else), and each "verb resource".
// A watch counts once, when its response starts; any other request when it completes.
func auditedRequests(b *testing.B, path string, offset int64, from, to time.Time) (reads, writes int, byCall map[string]int) {
	b.Helper()
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fh.Close() }()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	byCall = map[string]int{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != localcluster.AuditedUser {
			continue
		}
		if (e.Verb == "watch") != (e.Stage == "ResponseStarted") || (e.Stage != "ResponseStarted" && e.Stage != "ResponseComplete") {
			continue
		}
		if at := e.StageTimestamp.Time; at.Before(from) || at.After(to) {
			continue
		}
		switch e.Verb {
		case "get", "list", "watch":
			reads++
		default:
			writes++
		}
		what := e.Verb
		if e.ObjectRef != nil {
			what += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				what += "/" + e.ObjectRef.Subresource
			}
			if e.Verb == "get" && e.ObjectRef.Name != "" {
				// Which of a cluster's objects: vc-042-acl reads as {cluster}-acl.
				what += " " + fleetMember.ReplaceAllString(e.ObjectRef.Name, "{cluster}")
			}
		}
		byCall[what]++
	}
	return reads, writes, byCall
}

// topCalls prints byCall as rates over d, the most frequent first.
func topCalls(byCall map[string]int, d time.Duration) string {
	keys := slices.Collect(maps.Keys(byCall))
	sort.Slice(keys, func(i, j int) bool { return byCall[keys[i]] > byCall[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(byCall[k])/d.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// commandStats holds a connection to every node of a fleet, opened before the first count so
// that its own AUTH and HELLO are not counted.
type commandStats struct {
	clients []*valkey.Client
}

// fleetCommandStats connects to the node of every cluster of f with the operator's credentials;
// a node that cannot be reached (a loaded machine) is left out, and said so.
func fleetCommandStats(b *testing.B, f fleet) *commandStats {
	b.Helper()
	var list corev1.PodList
	if err := harness.K8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		b.Fatal(err)
	}
	cs := &commandStats{}
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		vc := &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: p.Labels[v1.LabelCluster]}}
		c, err := valkey.NewClient(harness.PodAddr(p), harness.Creds(b, vc))
		if err != nil {
			b.Logf("commandstats: %s left out: %v", p.Name, err)
			continue
		}
		cs.clients = append(cs.clients, c)
	}
	return cs
}

// calls is, per node, the sum of INFO commandstats' calls, less the liveness probes' AUTH and
// PING (valkey-cli in the pod), ten nodes asked at a time; -1 for a node that did not answer.
func (cs *commandStats) calls(b *testing.B) []int64 {
	b.Helper()
	out := make([]int64, len(cs.clients))
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for i, c := range cs.clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := c.Info(ctx, "commandstats")
			if err != nil {
				out[i] = -1
				return
			}
			var n int64
			for k, v := range info {
				cmd, ok := strings.CutPrefix(k, "cmdstat_")
				if !ok || cmd == "ping" || cmd == "auth" {
					continue
				}
				field, _, _ := strings.Cut(v, ",")
				calls, _ := strconv.ParseInt(strings.TrimPrefix(field, "calls="), 10, 64)
				n += calls
			}
			out[i] = n
		})
	}
	wg.Wait()
	return out
}

// commandsPerNode is the commands each node executed between two counts, on average over the
// nodes that answered both, less the first count's own INFO.
func commandsPerNode(before, after []int64) (perNode float64, nodes int) {
	var sum int64
	for i := range before {
		if before[i] >= 0 && after[i] >= 0 {
			sum += after[i] - before[i] - 1
			nodes++
		}
	}
	if nodes == 0 {
		return 0, 0
	}
	return float64(sum) / float64(nodes), nodes
}

func (cs *commandStats) close() {
	for _, c := range cs.clients {
		c.Close()
	}
}

// cutNoticed cuts the network of the one pod of cluster name in f and returns how long its
// Ready condition took to turn False, as read from the API server every 100 ms; then it restores
// the network and waits for the whole fleet to be Ready again.
func cutNoticed(b *testing.B, f fleet, name string) time.Duration {
	b.Helper()
	pods := fleetPods(b, f)[name]
	if len(pods) != 1 {
		b.Fatalf("%s has %d running pods, want 1", name, len(pods))
	}
	if err := harness.Cluster.Kubelet.CutPodNetwork(f.ns, pods[0]); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var noticed time.Duration
	for noticed == 0 {
		var vc v1.ValkeyCluster
		err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &vc)
		if err == nil && !meta.IsStatusConditionTrue(vc.Status.Conditions, v1.ConditionReady) {
			noticed = time.Since(start)
		} else if time.Since(start) > 2*time.Minute {
			_ = harness.Cluster.Kubelet.RestorePodNetwork(f.ns, pods[0])
			b.Fatalf("a cut of %s not noticed within 2 min (%v)", name, err)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := harness.Cluster.Kubelet.RestorePodNetwork(f.ns, pods[0]); err != nil {
		b.Fatal(err)
	}
	b.Logf("cut of %s noticed after %.2f s (load %s)", name, noticed.Seconds(), loadAvg())
	waitFleetReady(b, f, nil, 5*time.Minute, nil)
	return noticed
}

// watchRecovery watches f's pods from now on and returns a function that, given when the
// victims were killed and when each cluster was Ready again, logs where the recovery's time
// went, as the median and the largest over the clusters: until the kubelet reported the victim
// Failed, until the operator created its replacement, until the replacement ran (the local
// kubelet's pod start), and from then until the cluster was Ready (the operator's formation
// passes and status write).
func watchRecovery(b *testing.B, f fleet, victims map[string]string) func(start time.Time, readyAt map[string]time.Time) {
	b.Helper()
	cs, err := kubernetes.NewForConfig(harness.Cluster.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(f.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	failed, created, running := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			name := p.Labels[v1.LabelCluster]
			victim, isVictim := victims[name]
			now := time.Now()
			mu.Lock()
			switch {
			case !isVictim:
			case p.Name == victim:
				if _, seen := failed[name]; !seen && p.Status.Phase == corev1.PodFailed {
					failed[name] = now
				}
			default:
				if _, seen := created[name]; !seen && ev.Type == watch.Added {
					created[name] = now
				}
				if _, seen := running[name]; !seen && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					running[name] = now
				}
			}
			mu.Unlock()
		}
	}()
	return func(start time.Time, readyAt map[string]time.Time) {
		cancel()
		w.Stop()
		<-done
		var toFailed, toCreated, toRunning, toReady []float64
		for name := range victims {
			if t, ok := failed[name]; ok {
				toFailed = append(toFailed, t.Sub(start).Seconds())
			}
			if t, ok := created[name]; ok {
				toCreated = append(toCreated, t.Sub(start).Seconds())
			}
			if t, ok := running[name]; ok {
				toRunning = append(toRunning, t.Sub(start).Seconds())
				if r, ok := readyAt[name]; ok {
					toReady = append(toReady, r.Sub(t).Seconds())
				}
			}
		}
		b.Logf("recovery of %d (load %s), from the kill, median / max over the clusters: victim Failed %s, replacement created %s, replacement running %s; then Ready after running %s",
			len(victims), loadAvg(), medMax(toFailed), medMax(toCreated), medMax(toRunning), medMax(toReady))
	}
}

// medMax prints the median and the largest of xs, and how many there were.
func medMax(xs []float64) string {
	if len(xs) == 0 {
		return "none"
	}
	sort.Float64s(xs)
	return fmt.Sprintf("%.2f / %.2f s (%d)", xs[len(xs)/2], xs[len(xs)-1], len(xs))
}

// profileOperator, when BENCH_PROFILE_DIR names a folder, takes a 30 s CPU profile of the
// operator (its --pprof-bind-address) and, 3 s in, a dump of its goroutines, into files named
// after what; the returned function waits for both, then takes a heap profile. Without it, it does nothing.
func profileOperator(b *testing.B, what string) func() {
	b.Helper()
	dir := os.Getenv("BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	stamp := time.Now().Format("150405")
	fetch := func(url, file string) {
		resp, err := http.Get(url) //nolint:gosec,noctx // the operator's loopback pprof endpoint
		if err != nil {
			b.Errorf("profile: %v", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		out, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			b.Errorf("profile: %v", err)
			return
		}
		defer func() { _ = out.Close() }()
		_, _ = io.Copy(out, resp.Body)
	}
	var wg sync.WaitGroup
	base := "http://" + harness.Op.PprofAddr + "/debug/pprof/"
	wg.Go(func() { fetch(base+"profile?seconds=30", what+"-"+stamp+".cpu.pprof") })
	wg.Go(func() {
		time.Sleep(3 * time.Second)
		fetch(base+"goroutine?debug=1", what+"-"+stamp+".goroutines.txt")
	})
	return func() {
		wg.Wait()
		fetch(base+"heap", what+"-"+stamp+".heap.pprof")
		b.Logf("profiles of %s in %s", what, dir)
	}
}
