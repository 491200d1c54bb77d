package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster/simkubelet"
)

const (
	// simNamespace holds BenchmarkSimulatedFleet's clusters.
	simNamespace = "bench-simfleet"
	// defaultSimSizes is the curve BenchmarkSimulatedFleet draws unless SIM_FLEET_SIZES says
	// otherwise.
	defaultSimSizes = "1000,5000"
	// simReadyTimeout bounds the wait for each size's fleet to be Ready.
	simReadyTimeout = 60 * time.Minute
)

// BenchmarkSimulatedFleet is BenchmarkFleet beyond what the local cluster's kubelet holds: the
// real operator binary, as its own process, against the real API server, scheduler and
// controller manager, with each 1×0 cluster's pod on a simulated Node (package simkubelet)
// where a simulated Valkey node (valkeytest.Simulate) listens on the pod's own loopback address.
// At each size of SIM_FLEET_SIZES (comma-separated, growing; default 1000,5000) it reports,
// with the size after an @:
//   - s/ready: from creating the clusters that grow the fleet to N until all N are Ready;
//   - over steadyTicks ticks of the steady state: cpu% (of one core) and rss-MB (max) of the
//     operator from /proc; api-reads/s and api-writes/s from the API server's audit log (the
//     operator runs as the audited user); valkey-cmds/s, the commands the simulated nodes
//     received (without valkey-go's own HELLO, CLIENT SETINFO and PING); writes/tick, the
//     operator's writes to the fleet's objects per 30 s tick; s/heartbeat-mean and -max, the
//     intervals of each cluster's `active tick` lines;
//   - reconcile-p50-ms and -p99-ms: quantiles of the operator's own histogram
//     controller_runtime_reconcile_time_seconds{controller="valkeycluster"}, the difference of
//     its buckets between the window's first and last scrape (as Prometheus' histogram_quantile
//     over an increase: linear within a bucket); -forming the same over the growth to N.
//
// What the simulation leaves out, so what these figures do not include: valkey-server's own
// latency (a simulated node answers at once, from the test process), pod start (a simulated pod
// is Running as soon as it is bound), network cuts (BenchmarkFleet's cut figures). The operator,
// the API server, etcd, the scheduler and the benchmark's simulated fleet share the machine's
// cores; the load is logged beside every figure.
//
// It runs only when asked for by name (-bench with "Simulated" in it, or SIM_FLEET_SIZES set):
// `make bench BENCH=Fleet` means the real fleet, and this one takes the better part of an hour.
// Run: make bench BENCH=SimulatedFleet, or
// SIM_FLEET_SIZES=1000 go test -run '^$' -bench SimulatedFleet -benchtime 1x -timeout 120m ./tests/bench/
func BenchmarkSimulatedFleet(b *testing.B) {
	if !simRequested() {
		b.Skip("runs only when named: -bench SimulatedFleet, or SIM_FLEET_SIZES set")
	}
	if simSetup == nil {
		sizes := simSizes(b)
		// A connection or two per node on each side. The operator, restarted below, inherits it.
		raiseFileLimit(b)
		kl, err := simkubelet.Start(context.Background(), simkubelet.Config{
			RESTConfig:  harness.Cluster.Config,
			PodsPerNode: sizes[len(sizes)-1]/3 + 100,
		})
		if err != nil {
			b.Fatal(err)
		}
		simFleet = kl
		// As the audited user, and restarted in any case so that it has the raised limit.
		switchOperator(b, harness.OperatorBinary)
		auditedOperator = true
		simSetup = map[string]float64{}
		size := 0
		for _, n := range sizes {
			h0 := reconcileHistogram(b)
			start := time.Now()
			growSimFleet(b, size, n)
			size = n
			simSetup[fmt.Sprintf("s/ready@%d", n)] = time.Since(start).Seconds()
			p50, p99, count := harness.Quantiles(h0, reconcileHistogram(b))
			b.Logf("%d clusters Ready %.1f s after the first of this step was created (load %s); reconciles while forming: %d, p50 %.0f ms, p99 %.0f ms",
				n, time.Since(start).Seconds(), loadAvg(), count, p50, p99)
			simSetup[fmt.Sprintf("reconcile-p50-ms-forming@%d", n)] = p50
			simSetup[fmt.Sprintf("reconcile-p99-ms-forming@%d", n)] = p99
			for unit, v := range measureSimSteady(b, n) {
				simSetup[fmt.Sprintf("%s@%d", unit, n)] = v
			}
		}
		// The simulated Nodes take no new pods from here on: a test that runs after this one in
		// the same process gets real pods. The fleet's pods stay where they are.
		if err := kl.Cordon(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		for unit, v := range simSetup {
			b.ReportMetric(v, unit)
		}
	}
}

var (
	// simSetup holds BenchmarkSimulatedFleet's figures, measured once per process.
	simSetup map[string]float64
	// simFleet is the simulated Nodes, running until the process ends.
	simFleet *simkubelet.Kubelet
)

// simRequested reports whether BenchmarkSimulatedFleet was asked for by name.
func simRequested() bool {
	if os.Getenv("SIM_FLEET_SIZES") != "" {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), "Simulated")
}

// simSizes reads SIM_FLEET_SIZES.
func simSizes(b *testing.B) []int {
	b.Helper()
	return growingSizes(b, "SIM_FLEET_SIZES", defaultSimSizes)
}

// raiseFileLimit raises this process's soft limit of open files to its hard limit, for the
// simulated nodes' connections (one or two per node from the operator) and for the operator it
// starts, which inherits it. Without CAP_SYS_RESOURCE (the case here: 20 000) the hard limit
// stays; the simulated fleet therefore serves every node through one listener (simkubelet).
func raiseFileLimit(b *testing.B) {
	b.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("open files limit %d", lim.Cur)
}

// fastClient is a client of the local cluster without client-side rate limiting (rest.Config's
// default is 5 requests/s: creating 5 000 clusters would take 17 minutes).
func fastClient(b *testing.B) client.Client {
	b.Helper()
	rc := rest.CopyConfig(harness.Cluster.Config)
	rc.QPS, rc.Burst = -1, 0
	c, err := client.New(rc, client.Options{Scheme: harness.K8s.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// growSimFleet creates clusters vc-<from> … vc-<to-1> of 1×0 on the simulated Nodes, 16 at a
// time, and waits until all to are Ready.
func growSimFleet(b *testing.B, from, to int) {
	b.Helper()
	ctx := context.Background()
	if err := ensureNS(ctx, simNamespace); err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{harness.NewImage("scale-image"), harness.NewConfig("scale-config", "scale-image")} {
		if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	c := fastClient(b)
	onSim := func(vc *v1.ValkeyCluster) {
		vc.Spec.Placement = &v1.Placement{NodeSelector: map[string]v1.LabelValue{simkubelet.Label: "true"}}
	}
	names := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for name := range names {
				vc := harness.NewCluster(simNamespace, name, "scale-config", harness.WithShards(1), harness.WithReplicas(0), onSim)
				if err := c.Create(ctx, vc); err != nil && !isAlreadyExists(err) {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for i := from; i < to; i++ {
		names <- fmt.Sprintf("vc-%04d", i)
	}
	close(names)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	waitSimReady(b, c, to)
}

// waitSimReady waits until n clusters of the simulated fleet are Ready for their generation,
// listing only the clusters, every 2 s (a list of 5 000 pods four times a second, as
// waitFleetReady does for the real fleet, would be a load of its own on the API server), and
// logs the progress every 30 s.
func waitSimReady(b *testing.B, c client.Client, n int) {
	b.Helper()
	start := time.Now()
	nextLog := start.Add(30 * time.Second)
	for {
		var list v1.ValkeyClusterList
		err := c.List(context.Background(), &list, client.InNamespace(simNamespace))
		ready := 0
		states := map[v1.State]int{}
		for _, vc := range list.Items {
			states[vc.Status.State]++
			if meta.IsStatusConditionTrue(vc.Status.Conditions, v1.ConditionReady) && vc.Status.ObservedGeneration == vc.Generation {
				ready++
			}
		}
		if err == nil && ready >= n {
			return
		}
		if time.Since(start) > simReadyTimeout {
			b.Fatalf("%d of %d Ready after %s (%v; states %v, simulated pods %d)", ready, n, simReadyTimeout, err, states, simFleet.Running())
		}
		if time.Now().After(nextLog) {
			b.Logf("%s: %d of %d Ready, states %v, simulated pods %d (load %s)", time.Since(start).Round(time.Second), ready, n, states, simFleet.Running(), loadAvg())
			nextLog = nextLog.Add(30 * time.Second)
		}
		time.Sleep(2 * time.Second)
	}
}

// measureSimSteady watches the operator for steadyTicks ticks of the simulated fleet of n
// clusters, settled, and returns the figures BenchmarkSimulatedFleet reports (its comment).
func measureSimSteady(b *testing.B, n int) map[string]float64 {
	b.Helper()
	settleSim(b)
	window := time.Duration(steadyTicks)*controllers.TickInterval + 5*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	writes := countOperatorWrites(ctx, b, simNamespace)
	pid := harness.Op.Pid()
	auditFrom := fileSize(b, harness.Cluster.AuditLog)
	logFrom := fileSize(b, harness.Op.Stdout)
	stopProfile := profileOperator(b, fmt.Sprintf("sim-steady-%d", n))
	defer stopProfile()
	// The window's first scrape is its Prometheus's, one every 15 s, whose cost is in the figures.
	h0 := reconcileHistogram(b)
	acl0 := histogramOf(b, "valkeycluster-acl")
	nextScrape := time.Now().Add(15 * time.Second)
	cmds0 := simFleet.Fleet().Received()
	cpu0, start := procCPU(b, pid), time.Now()
	var rssMax float64
	for ctx.Err() == nil {
		rssMax = max(rssMax, procRSS(b, pid))
		if time.Now().After(nextScrape) {
			_ = reconcileHistogram(b)
			nextScrape = nextScrape.Add(15 * time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	elapsed := time.Since(start)
	cpu := procCPU(b, pid) - cpu0
	cmds := simFleet.Fleet().Received() - cmds0
	h1 := reconcileHistogram(b)
	p50, p99, passes := harness.Quantiles(h0, h1)
	aclP50, aclP99, aclPasses := harness.Quantiles(acl0, histogramOf(b, "valkeycluster-acl"))
	reads, writesAPI, byCall := auditedRequests(b, harness.Cluster.AuditLog, auditFrom, start, start.Add(elapsed))
	w := writes()
	mean, worst, count := activeTicks(b, harness.Op.Stdout, logFrom, simNamespace, start, start.Add(elapsed))
	b.Logf("%d simulated clusters, steady state over %s (load %s): %d operator writes, RSS max %.1f MB, CPU %.2f s; %d tick intervals, mean %.2f s, max %.2f s; API %d reads, %d writes; %d Valkey commands; %d cluster reconciles, p50 %.1f ms, p99 %.1f ms; %d ACL reconciles, p50 %.1f ms, p99 %.1f ms",
		n, elapsed.Round(time.Second), loadAvg(), w, rssMax, cpu.Seconds(), count, mean, worst, reads, writesAPI, cmds, passes, p50, p99, aclPasses, aclP50, aclP99)
	b.Logf("the operator's API requests by verb and resource (per s): %s", topCalls(byCall, elapsed))
	return map[string]float64{
		"writes/tick":          float64(w) / (elapsed.Seconds() / controllers.TickInterval.Seconds()),
		"rss-MB":               rssMax,
		"cpu%":                 100 * cpu.Seconds() / elapsed.Seconds(),
		"s/heartbeat-mean":     mean,
		"s/heartbeat-max":      worst,
		"api-reads/s":          float64(reads) / elapsed.Seconds(),
		"api-writes/s":         float64(writesAPI) / elapsed.Seconds(),
		"valkey-cmds/s":        float64(cmds) / elapsed.Seconds(),
		"reconcile-p50-ms":     p50,
		"reconcile-p99-ms":     p99,
		"reconciles/s":         float64(passes) / elapsed.Seconds(),
		"acl-reconcile-p99-ms": aclP99,
	}
}

// settleSim waits until the passes that formation scheduled have run out: until the operator
// makes fewer than simSettledWrites API writes a second over simSettleStep (its lease renewals
// and the scrapes' token reviews are about 0.5/s), for at most simSettleMax. One tick, as
// BenchmarkFleet waits, is not enough at 1 000: each cluster's first passes as Active (its
// disruption budget settled, then its status) queue behind one another, and a window that
// starts among them measures the tail of formation, not the steady state.
func settleSim(b *testing.B) {
	b.Helper()
	start := time.Now()
	for {
		from, offset := time.Now(), fileSize(b, harness.Cluster.AuditLog)
		time.Sleep(simSettleStep)
		_, writes, _ := auditedRequests(b, harness.Cluster.AuditLog, offset, from, time.Now())
		rate := float64(writes) / time.Since(from).Seconds()
		if rate < simSettledWrites {
			b.Logf("settled after %s (API writes %.2f/s; load %s)", time.Since(start).Round(time.Second), rate, loadAvg())
			return
		}
		if time.Since(start) > simSettleMax {
			b.Logf("not settled after %s (API writes %.2f/s; load %s): measuring anyway", simSettleMax, rate, loadAvg())
			return
		}
	}
}

const (
	// simSettleStep, simSettledWrites and simSettleMax: see settleSim.
	simSettleStep    = 15 * time.Second
	simSettledWrites = 1.0
	simSettleMax     = 10 * time.Minute
)

// metricsToken is a token a Prometheus scrapes the operator with, made once.
var metricsToken string

// reconcileHistogram is the cluster controller's reconcile time histogram, scraped now.
func reconcileHistogram(b *testing.B) harness.Histogram { return histogramOf(b, "valkeycluster") }

// histogramOf scrapes the operator's metrics as a Prometheus would and returns
// controller_runtime_reconcile_time_seconds of controller name.
func histogramOf(b *testing.B, name string) harness.Histogram {
	b.Helper()
	if metricsToken == "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t, err := harness.MetricsReaderToken(ctx, harness.K8s)
		if err != nil {
			b.Fatal(err)
		}
		metricsToken = t
	}
	// A scrape right after the operator (re)started finds no listener yet: try for a minute.
	deadline := time.Now().Add(time.Minute)
	code, body, err := harness.GetMetrics(harness.Op.MetricsAddr, metricsToken)
	for (err != nil || code != http.StatusOK) && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		code, body, err = harness.GetMetrics(harness.Op.MetricsAddr, metricsToken)
	}
	if err != nil || code != http.StatusOK {
		b.Fatalf("scrape: %d %v", code, err)
	}
	return harness.ParseHistogram(body, "controller_runtime_reconcile_time_seconds", `controller="`+name+`"`)
}

// activeTicks is tickIntervals for a long log: it reads the operator's log from offset on and
// decodes only the `active tick` lines, whose clusters are in namespace ns and whose time is
// within [from, to].
func activeTicks(b *testing.B, path string, offset int64, ns string, from, to time.Time) (mean, worst float64, n int) {
	b.Helper()
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fh.Close() }()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	needle := []byte(`"` + logging.MsgActiveTick + `"`)
	ticks := map[string][]time.Time{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), needle) {
			continue
		}
		var l harness.LogLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Message() != logging.MsgActiveTick || !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, l.Timestamp)
		if err != nil || ts.Before(from) || ts.After(to) {
			continue
		}
		ticks[l.Ref()] = append(ticks[l.Ref()], ts)
	}
	return tickStats(ticks)
}
