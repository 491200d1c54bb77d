package bench

import (
	"context"
	"fmt"
	"slices"
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
)

// BenchmarkSaveOnEmptyDir measures what an RDB snapshot costs a primary whose data directory is
// the pod's emptyDir: the operator's default `save ""` against snapshots, which Valkey's own
// default (`save 3600 1 300 100 60 10000`, the original's, which sets no default) takes every
// 60 s under writes. A 1×1 cluster is filled with 256 MB (4096 values of 64 KiB), the harness
// writer runs, and a probe times one SET at a time on the primary: 20 s without a snapshot, then
// 20 s with a BGSAVE started every 5 s. Reported per phase: the SET latency p50, p99 and max
// (ms), and for the snapshots the fork's pause (INFO stats latest_fork_usec, the longest seen)
// and the memory copied on write (INFO persistence rdb_last_cow_size). Reported, never asserted.
// Report: go test -run '^$' -bench SaveOnEmptyDir -benchtime 1x ./tests/bench/
func BenchmarkSaveOnEmptyDir(b *testing.B) {
	for range b.N {
		benchRuns++
		ns := fmt.Sprintf("bench-save-%d", benchRuns)
		vc := benchClusterWith(b, ns, 1, 1, func(c *v1.ValkeyConfig) {
			c.Spec.Resources.Memory = ptr.To(resource.MustParse("1Gi"))
			c.Spec.Valkey["maxmemory"] = "600mb"
		})
		harness.WaitReady(b, vc, 1, 1, nil, harness.FormTimeout)
		var primary string
		for _, n := range harness.CurrentCluster(b, vc).Status.NodeDetails {
			if n.Role == v1.NodeRolePrimary {
				primary = n.IP + ":6379"
			}
		}
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{primary}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		value := strings.Repeat("v", 64<<10)
		for batch := range 64 {
			cmds := make(valkeygo.Commands, 0, 64)
			for i := range 64 {
				cmds = append(cmds, c.B().Set().Key(fmt.Sprintf("{fill}%d", batch*64+i)).Value(value).Build())
			}
			for _, r := range c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					b.Fatal(err)
				}
			}
		}
		harness.WaitReady(b, vc, 1, 1, nil, harness.FormTimeout) // the replica caught up
		if info, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString(); err == nil {
			b.Logf("%s: used_memory %d MB after the fill", ns, infoField(info, "used_memory")>>20)
		}
		w, opts := harness.StartClusterWriter(b, vc)

		probe := func(d time.Duration, snapshot bool) (lat []time.Duration, forkUsec, cow int64, saves int) {
			end, next := time.Now().Add(d), time.Now()
			for i := 0; time.Now().Before(end); i++ {
				if snapshot && !time.Now().Before(next) {
					if err := c.Do(ctx, c.B().Bgsave().Build()).Error(); err == nil {
						saves++
					}
					next = time.Now().Add(5 * time.Second)
				}
				start := time.Now()
				if err := c.Do(ctx, c.B().Set().Key("probe:"+strconv.Itoa(i%1000)).Value("x").Build()).Error(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if snapshot && i%100 == 0 {
					if info, err := c.Do(ctx, c.B().Info().Section("persistence", "stats").Build()).ToString(); err == nil {
						f := infoField(info, "latest_fork_usec")
						forkUsec = max(forkUsec, f)
						cow = max(cow, infoField(info, "rdb_last_cow_size"))
					}
				}
				time.Sleep(time.Millisecond)
			}
			return lat, forkUsec, cow, saves
		}
		b.ResetTimer()
		quiet, _, _, _ := probe(20*time.Second, false)
		saving, fork, cow, saves := probe(20*time.Second, true)
		b.StopTimer()
		c.Close()
		r := harness.FinishWriter(b, w, vc, opts)
		p := func(lat []time.Duration, q float64) float64 {
			s := slices.Clone(lat)
			slices.Sort(s)
			return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
		}
		b.Logf("%s: without snapshots %d SETs p50 %.2f ms p99 %.2f ms max %.2f ms; with %d BGSAVEs %d SETs p50 %.2f ms p99 %.2f ms max %.2f ms; "+
			"longest fork %d µs, copied on write %d MB; writer: %d acked",
			ns, len(quiet), p(quiet, .5), p(quiet, .99), p(quiet, 1), saves, len(saving), p(saving, .5), p(saving, .99), p(saving, 1),
			fork, cow>>20, r.Acked)
		b.ReportMetric(p(quiet, .99), "ms/p99-no-save")
		b.ReportMetric(p(quiet, 1), "ms/max-no-save")
		b.ReportMetric(p(saving, .99), "ms/p99-save")
		b.ReportMetric(p(saving, 1), "ms/max-save")
		b.ReportMetric(float64(fork)/1000, "ms/fork")
		b.ReportMetric(float64(cow>>20), "MB/cow")
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta(ns)})
		b.StartTimer()
	}
}

// infoField is an integer field of an INFO reply, 0 when absent.
func infoField(info, name string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
