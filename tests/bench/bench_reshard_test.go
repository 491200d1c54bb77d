package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// benchReshardKeys is what the resharding benchmark seeds: 1.5 M keys of 100 bytes (the issue's
// figure), of which a quarter moves from 3 shards to 4.
const benchReshardKeys = 1_500_000

// BenchmarkReshard3To4 moves a 3×1 cluster on Valkey 8.0.1 holding 1.5 M keys of 100 B to 4
// shards under the 16-slot writer, twice per run, side by side:
//   - operator: a ValkeyCluster's spec.shards raised from 3 to 4; timed from the edit until Valkey
//     shows every primary within one slot of 4096 (total), and from the moment Valkey shows the
//     fourth primary until then (migration: what the operator's slot moves take);
//   - valkey-cli: an identical 3×1 of bare valkey-server processes on this host (same version,
//     same persistence settings, no operator), a fourth primary and its replica added with
//     `valkey-cli --cluster add-node`, then `valkey-cli --cluster rebalance
//     --cluster-use-empty-masters` with its defaults, timed around that command.
//
// Each reports keys/s (the keys the new primary holds afterwards, over the migration time),
// slots/s, and the longest time one of the writer's slots refused writes. Reported, never
// asserted. Report: make bench BENCH=Reshard3To4 (or go test -run '^$' -bench Reshard3To4
// -benchtime 1x ./tests/bench/).
func BenchmarkReshard3To4(b *testing.B) {
	for range b.N {
		op := reshardWithOperator(b, "8.0.1")
		cli := reshardWithValkeyCLI(b)
		for _, r := range []reshardRun{op, cli} {
			b.Logf("%-10s migration %6.1f s (total %6.1f s): %7d keys moved, %6.0f keys/s, %5.0f slots/s, longest refusal %s, %d writes failed, %d lost",
				r.tool, r.migration.Seconds(), r.total.Seconds(), r.keys, float64(r.keys)/r.migration.Seconds(),
				float64(r.slots)/r.migration.Seconds(), r.longest.Round(time.Millisecond), r.failures, r.lost)
		}
		b.ReportMetric(float64(op.keys)/op.migration.Seconds(), "keys/s")
		b.ReportMetric(float64(cli.keys)/cli.migration.Seconds(), "cli-keys/s")
		b.ReportMetric(float64(op.slots)/op.migration.Seconds(), "slots/s")
		b.ReportMetric(float64(cli.slots)/cli.migration.Seconds(), "cli-slots/s")
		b.ReportMetric(op.total.Seconds(), "s/total")
		b.ReportMetric(float64(op.longest.Milliseconds()), "ms/longest-refusal")
		b.ReportMetric(float64(cli.longest.Milliseconds()), "cli-ms/longest-refusal")
	}
}

// BenchmarkReshard9From3To4 is BenchmarkReshard3To4 on Valkey 9.1.2, where the operator moves
// slots with atomic CLUSTER MIGRATESLOTS, side by side with the same migrations run bare: an
// identical 3×1 of bare 9.1.2 servers, a fourth primary and its replica added with `valkey-cli
// --cluster add-node`, then one CLUSTER MIGRATESLOTS per source of the slots the operator moves
// from it (the highest of each, down to an even 4096 each), one after the other as a 9.x target
// imports one job at a time, timed from the first command to the last job's success. The goal
// is the operator within 20 % of the bare keys/s. Report: make bench BENCH=Reshard9From3To4.
func BenchmarkReshard9From3To4(b *testing.B) {
	for range b.N {
		op := reshardWithOperator(b, localcluster.Valkey9Version)
		bare := reshardWithMigrateSlots(b)
		for _, r := range []reshardRun{op, bare} {
			b.Logf("%-12s migration %6.1f s (total %6.1f s): %7d keys moved, %6.0f keys/s, %5.0f slots/s, longest refusal %s, %d writes failed, %d lost",
				r.tool, r.migration.Seconds(), r.total.Seconds(), r.keys, float64(r.keys)/r.migration.Seconds(),
				float64(r.slots)/r.migration.Seconds(), r.longest.Round(time.Millisecond), r.failures, r.lost)
		}
		b.ReportMetric(float64(op.keys)/op.migration.Seconds(), "keys/s")
		b.ReportMetric(float64(op.keys)/op.moving.Seconds(), "moving-keys/s")
		b.ReportMetric(op.moving.Seconds(), "s/moving")
		b.ReportMetric(bare.migration.Seconds(), "bare-s/migration")
		b.ReportMetric(float64(bare.keys)/bare.migration.Seconds(), "bare-keys/s")
		b.ReportMetric(float64(op.slots)/op.migration.Seconds(), "slots/s")
		b.ReportMetric(op.total.Seconds(), "s/total")
		b.ReportMetric(float64(op.longest.Milliseconds()), "ms/longest-refusal")
		b.ReportMetric(float64(bare.longest.Milliseconds()), "bare-ms/longest-refusal")
	}
}

type reshardRun struct {
	tool                      string
	total, migration, longest time.Duration
	// moving (Valkey 9 only): from the first atomic migration job to an even spread.
	moving                      time.Duration
	keys, slots, failures, lost int
}

func reshardWithOperator(b *testing.B, version string) reshardRun {
	benchRuns++
	ns := fmt.Sprintf("bench-reshard-%d", benchRuns)
	// Without the tests' maxmemory, as the bare side runs: 1.5 M keys fill ~90 of a primary's
	// 100 MB, and the few MB the mover's connections take on a source then refused writes with
	// OOM (measured: 373 ms on one shard), which says that the cluster is full, not how fast
	// slots move.
	vc := benchClusterWith(b, ns, 3, 1, func(c *v1.ValkeyConfig) {
		delete(c.Spec.Valkey, "maxmemory")
		c.Spec.Resources.Memory = ptr.To(resource.MustParse("1Gi"))
	}, version)
	defer func() { _ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(ns)}) }()
	harness.WaitReady(b, vc, 3, 1, nil, harness.FormTimeout)
	var addrs []string
	for _, p := range harness.Pods(b, vc) {
		addrs = append(addrs, harness.PodAddr(p))
	}
	seedAt(b, addrs, benchReshardKeys)
	w, opts := harness.StartClusterWriter(b, vc)
	start := time.Now()
	harness.EditCluster(b, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	var fourth, firstJob time.Time
	for {
		pods := harness.Pods(b, vc)
		owners, primaries := slotOwnersAt(b, pods)
		if fourth.IsZero() && primaries >= 4 {
			fourth = time.Now()
		}
		if firstJob.IsZero() && version != "8.0.1" && migrationJobsAt(pods) > 0 {
			firstJob = time.Now()
		}
		if evenly(owners, 4) {
			break
		}
		if time.Since(start) > harness.RollTimeout {
			b.Fatalf("not 4 even shards within %s: %v", harness.RollTimeout, owners)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run := reshardRun{tool: "operator " + version, total: time.Since(start), migration: time.Since(fourth), slots: 16384 / 4}
	if !firstJob.IsZero() {
		// Valkey 9: from the first CLUSTER MIGRATESLOTS job any node lists (the new shard's
		// replica synced, the grant loaded) to an even spread: what the bare jobs are timed by.
		run.moving = time.Since(firstJob)
	}
	harness.WaitScaled(b, vc, 4, 1, harness.RollTimeout)
	r := harness.FinishWriter(b, w, vc, opts)
	run.longest, _ = r.LongestRefusal()
	run.lost = r.LostReplicated + r.LostUnreplicated
	for _, s := range r.Slots {
		run.failures += s.Failures
	}
	run.keys = newestPrimaryKeys(b, harness.Pods(b, vc))
	return run
}

// bareReshard is the side a resharding bench runs beside the operator: an identical bare 3×1 of
// valkey-server (no operator), seeded with benchReshardKeys, plus a fourth, slot-less primary and
// its replica, and the writer on, acknowledged writes flowing.
type bareReshard struct {
	bare   *bareCluster
	cli    func(args ...string) string
	target string // the fourth primary's node id
	w      *harness.Writer
	opts   harness.WriterOptions
}

// startBareReshard starts a bareReshard of the valkey-server and valkey-cli in bin ("" for the
// PATH's), its writer's keys under prefix. close stops it.
func startBareReshard(b *testing.B, bin, prefix string) *bareReshard {
	r := &bareReshard{bare: startBareCluster(b, 8, filepath.Join(bin, "valkey-server"))}
	r.cli = func(args ...string) string {
		out, err := exec.Command(filepath.Join(bin, "valkey-cli"), args...).CombinedOutput()
		if err != nil {
			b.Fatalf("valkey-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	a := r.bare.addrs
	r.cli(append(append([]string{"--cluster", "create"}, a[:6]...), "--cluster-replicas", "1", "--cluster-yes")...)
	r.bare.waitOK(b, 6)
	seedAt(b, a[:6], benchReshardKeys)
	r.cli("--cluster", "add-node", a[6], a[0])
	r.bare.waitOK(b, 7)
	r.target = strings.TrimSpace(r.cli("-h", "127.0.0.1", "-p", r.bare.port(6), "CLUSTER", "MYID"))
	r.cli("--cluster", "add-node", a[7], a[0], "--cluster-slave", "--cluster-master-id", r.target)
	r.bare.waitOK(b, 8)
	r.opts = harness.WriterOptions{Addrs: a, Prefix: prefix}
	w, err := harness.StartWriter(r.opts)
	if err != nil {
		r.bare.stop()
		b.Fatal(err)
	}
	r.w = w
	if err := w.WaitAcked(20, time.Minute); err != nil {
		r.close()
		b.Fatal(err)
	}
	return r
}

func (r *bareReshard) close() {
	r.w.Close()
	r.bare.stop()
}

// finish completes run, whose migration ended: the writer's report (longest refusal, writes lost,
// failures) and the keys the fourth primary holds.
func (r *bareReshard) finish(b *testing.B, run reshardRun) reshardRun {
	run.total = run.migration
	rep, err := r.w.Report(context.Background(), r.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Log(rep.String())
	run.longest, _ = rep.LongestRefusal()
	run.lost = rep.LostReplicated + rep.LostUnreplicated
	for _, s := range rep.Slots {
		run.failures += s.Failures
	}
	n, err := strconv.Atoi(strings.TrimSpace(r.cli("-h", "127.0.0.1", "-p", r.bare.port(6), "DBSIZE")))
	if err != nil {
		b.Fatal(err)
	}
	run.keys = n
	return run
}

func reshardWithValkeyCLI(b *testing.B) reshardRun {
	r := startBareReshard(b, "", "bench-cli:")
	defer r.close()
	start := time.Now()
	r.cli("--cluster", "rebalance", r.bare.addrs[0], "--cluster-use-empty-masters")
	return r.finish(b, reshardRun{tool: "valkey-cli", migration: time.Since(start), slots: 16384 / 4})
}

// reshardWithMigrateSlots: see BenchmarkReshard9From3To4.
func reshardWithMigrateSlots(b *testing.B) reshardRun {
	r := startBareReshard(b, filepath.Join(localcluster.Valkey9Dir(), "bin"), "bench-bare:")
	defer r.close()
	cli, bare, target := r.cli, r.bare, r.target
	// The slots the operator would move: from each source, its highest down to 4096 left.
	type job struct{ port, lo, hi string }
	var jobs []job
	for _, line := range strings.Split(strings.TrimSpace(cli("-h", "127.0.0.1", "-p", bare.port(0), "CLUSTER", "NODES")), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || f[0] == target {
			continue
		}
		lo, hi, _ := strings.Cut(f[8], "-")
		l, _ := strconv.Atoi(lo)
		h, _ := strconv.Atoi(hi)
		give := (h - l + 1) - 16384/4
		_, port, _ := net.SplitHostPort(strings.Split(f[1], "@")[0])
		jobs = append(jobs, job{port, strconv.Itoa(h - give + 1), hi})
	}
	start := time.Now()
	slots := 0
	for _, j := range jobs {
		cli("-h", "127.0.0.1", "-p", j.port, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", j.lo, j.hi, "NODE", target)
		for {
			out := cli("-h", "127.0.0.1", "-p", j.port, "CLUSTER", "GETSLOTMIGRATIONS")
			if _, after, ok := strings.Cut(out, "state\n"); ok {
				state, _, _ := strings.Cut(after, "\n")
				if state == "success" {
					break
				}
				if state == "failed" || state == "cancelled" {
					b.Fatalf("bare MIGRATESLOTS %s-%s from %s: %s", j.lo, j.hi, j.port, out)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		l, _ := strconv.Atoi(j.lo)
		h, _ := strconv.Atoi(j.hi)
		slots += h - l + 1
	}
	return r.finish(b, reshardRun{tool: "bare 9.1.2", migration: time.Since(start), slots: slots})
}

// migrationJobsAt counts the CLUSTER GETSLOTMIGRATIONS entries of every pod that answers (the
// bench clusters bind no user: the default user may run it).
func migrationJobsAt(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{harness.PodAddr(p)}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if jobs, err := c.Do(ctx, c.B().Arbitrary("CLUSTER", "GETSLOTMIGRATIONS").Build()).ToArray(); err == nil {
			n += len(jobs)
		}
		cancel()
		c.Close()
	}
	return n
}

// seedAt writes n keys of 100 bytes (seedWith) through a cluster client seeded with addrs.
func seedAt(tb testing.TB, addrs []string, n int) {
	tb.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	harness.SeedWith(tb, c, n)
}

// slotOwnersAt asks the first pod that answers for CLUSTER SHARDS, and returns the slot count
// of each primary that owns slots, and how many primaries there are (with or without slots).
func slotOwnersAt(tb testing.TB, pods []corev1.Pod) (owners map[string]int, primaries int) {
	tb.Helper()
	for _, p := range pods {
		out, err := harness.NodeDo(p, "", "", "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		return parseSlotOwners(out)
	}
	return nil, 0
}

// parseSlotOwners reads CLUSTER NODES: slots per primary id (ranges only; open slots ignored).
func parseSlotOwners(nodes string) (map[string]int, int) {
	owners := map[string]int{}
	primaries := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "master") {
			continue
		}
		primaries++
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			l, _ := strconv.Atoi(lo)
			h, _ := strconv.Atoi(hi)
			owners[f[0]] += h - l + 1
		}
	}
	return owners, primaries
}

// evenly: n primaries own slots, each within one slot of 16384/n, all 16384 assigned.
func evenly(owners map[string]int, n int) bool {
	if len(owners) != n {
		return false
	}
	total := 0
	for _, c := range owners {
		if c < 16384/n-1 || c > 16384/n+1 {
			return false
		}
		total += c
	}
	return total == 16384
}

// newestPrimaryKeys is the key count of the shard created last (the highest shard index): the keys
// it received. Its primary and its synced replica hold the same keys, so the larger answer of
// its pods is taken.
func newestPrimaryKeys(tb testing.TB, pods []corev1.Pod) int {
	tb.Helper()
	best, keys := -1, 0
	for _, p := range pods {
		i, err := strconv.Atoi(p.Labels[v1.LabelShard])
		if err != nil || i < best {
			continue
		}
		out, err := harness.NodeDo(p, "", "", "INFO", "keyspace") // DBSIZE's integer reply is no string to nodeDo
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(out, "db0:keys=")
		n, _ := strconv.Atoi(strings.Split(rest, ",")[0])
		if i > best {
			keys = 0
		}
		best, keys = i, max(keys, n)
	}
	return keys
}

// bareCluster is valkey-server processes on 127.0.0.1 with cluster mode on and the operator's
// persistence defaults (no AOF, no RDB saves), run by the benchmark itself: the reference tool's
// side of a comparison, with no operator and no Kubernetes.
type bareCluster struct {
	dir   string
	addrs []string
	procs []*exec.Cmd
}

func startBareCluster(tb testing.TB, n int, server string) *bareCluster {
	tb.Helper()
	c := &bareCluster{dir: tb.TempDir()}
	for range n {
		port := freeBusPair(tb)
		dir := filepath.Join(c.dir, strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-node-timeout", "5000", "--dir", dir,
			"--appendonly", "no", "--save", "", "--daemonize", "no", "--logfile", filepath.Join(dir, "valkey.log"))
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		c.procs = append(c.procs, cmd)
		c.addrs = append(c.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))

	}
	for _, a := range c.addrs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				_ = conn.Close()
				break
			}
			if time.Now().After(deadline) {
				c.stop()
				tb.Fatalf("valkey-server on %s did not listen", a)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

func (c *bareCluster) port(i int) string { _, p, _ := net.SplitHostPort(c.addrs[i]); return p }

// waitOK waits until each of the first n nodes sees n nodes, none in handshake, and says
// cluster_state ok (a node added by add-node that has not yet learned the slots refuses an
// import with CLUSTERDOWN).
func (c *bareCluster) waitOK(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < n; {
		info, err1 := exec.Command("valkey-cli", "-h", "127.0.0.1", "-p", c.port(i), "CLUSTER", "INFO").Output()
		nodes, err2 := exec.Command("valkey-cli", "-h", "127.0.0.1", "-p", c.port(i), "CLUSTER", "NODES").Output()
		if err1 == nil && err2 == nil && strings.Contains(string(info), "cluster_state:ok") &&
			len(strings.Split(strings.TrimSpace(string(nodes)), "\n")) == n && !strings.Contains(string(nodes), "handshake") {
			i++
			continue
		}
		if time.Now().After(deadline) {
			tb.Fatalf("bare cluster: node %d does not see %d nodes and ok within a minute:\n%s\n%s", i, n, info, nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *bareCluster) stop() {
	for _, p := range c.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
}

// freeBusPair finds a port p with p and its cluster bus port p+10000 both free on 127.0.0.1.
func freeBusPair(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if p+10000 > 65535 {
			continue
		}
		if bl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000))); err == nil {
			_ = bl.Close()
			return p
		}
	}
	tb.Fatal("no free port pair")
	return 0
}
