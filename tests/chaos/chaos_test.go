package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
)

// The bounded run in `make test` (`go test ./...`): FixedSeed and one random seed (printed in
// the log with its replay command), BoundedDuration of schedule each, about 3-6 minutes a seed
// here (formation, the schedule, convergence, reading back) beside tests/e2e. CHAOS_RANDOM=0
// leaves the random seed out (a run that must be the same every time). `make chaos` sets
// CHAOS_SEED and CHAOS_DURATION for one long run instead.
const (
	FixedSeed       = 20261201
	BoundedDuration = 150 * time.Second
)

// TestChaos runs the seeded chaos schedule on three clusters at once (see package schedule for
// what a schedule holds and its rules), checks that each converges to its final spec within
// ConvergeBound and that every write a replica acknowledged reads back, and writes a report per
// seed (t.Log and a file in the work directory).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite needs its local cluster (TestMain starts none with -short)")
	}
	seeds, duration := plan(t)
	for i, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, i, seed, duration) })
	}
}

// plan reads CHAOS_SEED and CHAOS_DURATION; without them, the bounded run's two seeds.
func plan(t *testing.T) ([]uint64, time.Duration) {
	duration := BoundedDuration
	if d := os.Getenv("CHAOS_DURATION"); d != "" {
		var err error
		if duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("CHAOS_DURATION: %v", err)
		}
	}
	random := rand.Uint64() % 1_000_000_000
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
		return []uint64{seed}, duration
	}
	if os.Getenv("CHAOS_DURATION") != "" {
		// A long run without a seed: one random seed, printed with its replay command.
		return []uint64{random}, duration
	}
	if os.Getenv("CHAOS_RANDOM") == "0" {
		t.Logf("bounded run: fixed seed %d, %s (CHAOS_RANDOM=0: no random seed)", FixedSeed, duration)
		return []uint64{FixedSeed}, duration
	}
	t.Logf("bounded run: fixed seed %d and random seed %d, %s each", FixedSeed, random, duration)
	return []uint64{FixedSeed, random}, duration
}

func runSeed(t *testing.T, i int, seed uint64, duration time.Duration) {
	began := time.Now()
	sched := schedule.Generate(schedule.Options{Seed: seed, Duration: duration, Clusters: startClusters})
	t.Logf("replay: make chaos SEED=%d DURATION=%s\n%s", seed, duration, sched)
	r := newRunner(sched, fmt.Sprintf("chaos%d", i), func(f string, a ...any) {
		t.Logf("%s "+f, append([]any{time.Now().Format("15:04:05.0")}, a...)...)
	})
	ctx := context.Background()
	defer func() {
		for _, c := range r.targets {
			if c.writer != nil {
				c.writer.Close()
			}
			c.delete(ctx)
		}
		r.stopTwins(ctx)
	}()
	var failures []string
	outcomes := map[string]*outcome{}
	if err := r.setup(ctx); err != nil {
		failures = append(failures, "setup: "+err.Error())
	} else {
		r.execute(ctx)
		r.endTwins(ctx)
		// Converge side by side, each timed from the end of the schedule.
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range r.targets {
			wg.Go(func() {
				d, problem := r.waitConverged(ctx, c, ConvergeBound)
				o := &outcome{converged: d, problem: problem}
				if problem == "" {
					// Every slot takes writes again, through the writer's own client.
					if err := c.writer.WaitAcked(5, time.Minute); err != nil {
						o.writeErr = err.Error()
					}
				}
				mu.Lock()
				outcomes[c.name] = o
				mu.Unlock()
			})
		}
		wg.Wait()
		r.unscheduled(ctx, outcomes)
		for _, c := range r.targets {
			o := outcomes[c.name]
			read, err := c.writerOptions(ctx)
			if err == nil {
				o.writes, err = c.writer.Report(ctx, read)
			}
			if err != nil {
				o.writeErr += " read back: " + err.Error()
			}
			if o.problem != "" {
				failures = append(failures, fmt.Sprintf("%s did not converge within %s: %s", c.name, ConvergeBound, o.problem))
			}
			if o.writeErr != "" {
				failures = append(failures, fmt.Sprintf("%s writer: %s", c.name, o.writeErr))
			}
			if o.writes.LostReplicated > 0 {
				failures = append(failures, fmt.Sprintf("%s: %d writes acknowledged by WAIT 1 were lost", c.name, o.writes.LostReplicated))
			}
			if o.writes.ReadErrors > 0 {
				failures = append(failures, fmt.Sprintf("%s: %d acknowledged writes could not be read back", c.name, o.writes.ReadErrors))
			}
		}
	}
	report := r.report(time.Since(began), outcomes, failures)
	path := filepath.Join(workDir, fmt.Sprintf("chaos-report-seed-%d.txt", seed))
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("report (also in %s; operator log %s):\n%s", path, op.logPath(), report)
	if len(failures) > 0 {
		t.Errorf("chaos seed %d failed; replay with: make chaos SEED=%d DURATION=%s", seed, seed, duration)
	}
}
