package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/valkey"
)

const (
	// migrateBatchKeys is how many keys one GETKEYSINSLOT / MIGRATE round moves: measured here,
	// 1000-key batches with many slots in flight moved 85-91 k keys/s on 2 cores.
	migrateBatchKeys = 1000
	// migrateTimeout is MIGRATE's own timeout for one batch, in the source node's terms.
	migrateTimeout = 5 * time.Second
	// moveReserve is the part of the pass budget kept for the moves already started to close and
	// for the status: no new slot is opened with less than this left.
	moveReserve = 3 * time.Second
	// slotsInFlight is how many slots of one (source, target) pair move at once: their commands
	// share the pooled connections and overlap their round trips (measured here: 4 in flight
	// 58 k keys/s, 16-64 in flight 85-91 k keys/s).
	slotsInFlight = 16
)

// moveSlots runs a batch of slot moves: the (source, target) pairs concurrently, each pair's
// slots one after the other. A slot is opened only while the pass has more than moveReserve
// left and no move of the batch failed; one cut short stays open and the next pass settles it.
// node gives a node's client by pod; ipOf its IP; primaries are every live primary's pod, told
// the new owner of each slot.
func moveSlots(ctx context.Context, log *zap.Logger, node func(string) (*valkey.Client, error), mig *migrators, ipOf func(string) string, primaries []string, a plan.MoveSlots) error {
	defer mig.close()
	byPair := map[[2]string][]plan.SlotMove{}
	var order [][2]string
	for _, m := range a.Moves {
		k := [2]string{m.Source, m.Target}
		if _, ok := byPair[k]; !ok {
			order = append(order, k)
		}
		byPair[k] = append(byPair[k], m)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(order))
	moved := make([]int, len(order))
	method := make([]string, len(order))
	var mu sync.Mutex
	// The first failed move stops the batch: no pair opens another slot, the slots in flight
	// finish (or fail), and the pass ends. A failure is most often a node gone (a primary killed
	// mid-move): the next pass must observe it and fail its shard over at once, not after every
	// other pair used up the pass budget (measured: a source killed mid-batch left its slots
	// refusing writes for 8.2 s, the rest of the pass). What is left open is settled next pass.
	stop := make(chan struct{})
	var stopOnce sync.Once
	// classic moves pair i's slots with the classic protocol, slotsInFlight at a time, and
	// returns when they are done, a move failed, or the pass has no time left for another.
	classic := func(i int, moves []plan.SlotMove) {
		method[i] = logging.MethodClassic
		next := make(chan plan.SlotMove)
		go func() {
			defer close(next)
			for _, m := range moves {
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < moveReserve {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				select {
				case next <- m:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			}
		}()
		var pair sync.WaitGroup
		for range slotsInFlight {
			pair.Add(1)
			go func() {
				defer pair.Done()
				for m := range next {
					err := moveSlot(ctx, node, mig, ipOf, primaries, m)
					mu.Lock()
					if err != nil {
						stopOnce.Do(func() { close(stop) })
						errs[i] = errors.Join(errs[i], fmt.Errorf("slot %d from %s to %s: %w", m.Slot, m.Source, m.Target, err))
					} else {
						moved[i]++
					}
					mu.Unlock()
				}
			}()
		}
		pair.Wait()
	}
	versions := &versionCache{node: node}
	// Atomic migrations into one target run one after the other: a Valkey 9 node imports one
	// job at a time ("Slot import in progress" otherwise, measured on 9.1.2).
	atomicByTarget := map[string][]int{}
	var targets []string
	for i, k := range order {
		if a.Settle || !versions.atomic(ctx, k[0]) || !versions.atomic(ctx, k[1]) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				classic(i, byPair[k])
			}()
			continue
		}
		if _, ok := atomicByTarget[k[1]]; !ok {
			targets = append(targets, k[1])
		}
		atomicByTarget[k[1]] = append(atomicByTarget[k[1]], i)
	}
	for _, target := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range atomicByTarget[target] {
				k := order[i]
				method[i] = logging.MethodAtomic
				n, err := migrateAtomic(ctx, node, byPair[k])
				if err != nil && n == 0 && unsupported(err) {
					// Both run Valkey 9, but this one cannot (an ACL that predates it, say): the
					// classic protocol, which every version runs.
					log.Debug(logging.MsgMovingSlots, logging.Pod(k[0]), zap.String(logging.FieldTarget, k[1]), zap.Error(err))
					classic(i, byPair[k])
					continue
				}
				mu.Lock()
				moved[i], errs[i] = n, err
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, k := range order {
		if moved[i] > 0 {
			log.Info(logging.MsgMovingSlots, logging.Pod(k[0]), zap.String(logging.FieldTarget, k[1]), zap.Int(logging.FieldSlots, moved[i]), zap.String(logging.FieldMethod, method[i]))
		}
	}
	return errors.Join(errs...)
}

// versionCache asks each node of a batch once whether it can take part in an atomic migration.
type versionCache struct {
	node func(string) (*valkey.Client, error)
	mu   sync.Mutex
	seen map[string]bool
}

// atomic reports whether pod's node runs Valkey 9 or later (CLUSTER MIGRATESLOTS) and already
// enforces the replication user's slot import rules, which the ACL Secret carries only while a
// reshard is pending: the source of an atomic migration replays the slots on the target as its
// masteruser, so a move started before the target enforces them would fail with NOPERM. Until
// both nodes of a pair do, the pair moves with the classic protocol, which every version runs and
// which needs no such grant (in practice the grant is loaded while the new shard's nodes start
// and sync, before the first move). A node that does not say is taken for one that cannot.
func (v *versionCache) atomic(ctx context.Context, pod string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ok, known := v.seen[pod]; known {
		return ok
	}
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	ok := false
	if c, err := v.node(pod); err == nil {
		if ver, err := c.Version(ctx); err == nil && valkey9OrLater(ver) {
			list, err := c.ACLList(ctx)
			ok = err == nil && enforcesSlotImport(list)
		}
	}
	v.seen[pod] = ok
	return ok
}

// unsupported reports whether err says the node cannot run an atomic migration at all (a command
// or permission it lacks), as opposed to one that failed or is busy.
func unsupported(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "noperm") || strings.Contains(msg, "unknown")
}

// atomicPoll is how often the progress of an atomic migration is read.
const atomicPoll = 50 * time.Millisecond

// migrateAtomic moves the slots of one (source, target) pair with one CLUSTER MIGRATESLOTS and
// waits for Valkey to report it ended, within the pass budget (less moveReserve). A migration
// still running when the budget ends goes on in Valkey: the next pass finds it in CLUSTER
// GETSLOTMIGRATIONS (an export on the source, or an import on the target, not ended) and waits
// for it instead of starting another, which Valkey would refuse ("Slot import in progress"). It
// returns how many slots moved.
func migrateAtomic(ctx context.Context, node func(string) (*valkey.Client, error), moves []plan.SlotMove) (int, error) {
	src, err := node(moves[0].Source)
	if err != nil {
		return 0, err
	}
	dst, err := node(moves[0].Target)
	if err != nil {
		return 0, err
	}
	// running is the first migration not ended that op on c lists, by name ("" for none).
	running := func(c *valkey.Client, op string) (string, error) {
		jobs, err := c.SlotMigrations(ctx)
		if err != nil {
			return "", err
		}
		for _, j := range jobs {
			if j.Operation == op && !j.Terminal() {
				return j.Name, nil
			}
		}
		return "", nil
	}
	// wait polls until check says done, or the pass has no time left (done false, no error).
	wait := func(check func() (bool, error)) (bool, error) {
		for {
			done, err := check()
			if err != nil || done {
				return done, err
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < moveReserve {
				return false, nil
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(atomicPoll):
			}
		}
	}
	idle, err := wait(func() (bool, error) {
		exp, err := running(src, "EXPORT")
		if err != nil || exp != "" {
			return false, err
		}
		imp, err := running(dst, "IMPORT")
		return imp == "", err
	})
	if err != nil || !idle {
		return 0, err
	}
	set := make(slot.Set, 0, len(moves))
	for _, m := range moves {
		set = append(set, slot.Range{Start: m.Slot, End: m.Slot})
	}
	ranges := set.Normalize()
	if err := src.MigrateSlots(ctx, ranges, moves[0].TargetID); err != nil {
		return 0, err
	}
	want := valkey.FormatRanges(ranges)
	var failed error
	done, err := wait(func() (bool, error) {
		jobs, err := src.SlotMigrations(ctx)
		if err != nil {
			return false, err
		}
		for _, j := range jobs { // newest first
			if j.Operation != "EXPORT" || j.SlotRanges != want || j.TargetNode != moves[0].TargetID {
				continue
			}
			if j.Terminal() && j.State != "success" {
				failed = fmt.Errorf("cluster migrateslots %s to %s: %s: %s", want, moves[0].Target, j.State, j.Message)
			}
			return j.Terminal(), nil
		}
		return false, nil
	})
	switch {
	case err != nil:
		return 0, err
	case failed != nil:
		return 0, failed
	case !done:
		return 0, nil
	}
	return len(moves), nil
}

// moveSlot moves one slot with the classic protocol. Every step can be repeated, so a move
// resumed after a crash runs them all again.
func moveSlot(ctx context.Context, node func(string) (*valkey.Client, error), mig *migrators, ipOf func(string) string, primaries []string, m plan.SlotMove) error {
	src, err := node(m.Source)
	if err != nil {
		return err
	}
	mover, err := mig.get(m.Source)
	if err != nil {
		return err
	}
	dst, err := node(m.Target)
	if err != nil {
		return err
	}
	// A move resumed after an interruption may find either half done: the target already owning
	// the slot (its SETSLOT NODE ran), or the source no longer owning it. Neither is an error:
	// whatever keys the source still holds are moved, then both are told the owner.
	if err := dst.SetSlotImporting(ctx, m.Slot, m.SourceID); err != nil && !strings.Contains(err.Error(), "already the owner") {
		return err
	}
	if err := src.SetSlotMigrating(ctx, m.Slot, m.TargetID); err != nil && !strings.Contains(err.Error(), "not the owner") {
		return err
	}
	ip := ipOf(m.Target)
	for {
		keys, err := src.GetKeysInSlot(ctx, m.Slot, migrateBatchKeys)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		// REPLACE: the source is authoritative for every key it still holds (a key written on
		// the target during the move was absent from the source, by ASK's rule).
		if err := mover.MigrateKeys(ctx, ip, ClientPort, keys, migrateTimeout, true); err != nil {
			return err
		}
	}
	// The target first: once it owns the slot, the source's SETSLOT NODE cannot leave the slot
	// without an owner.
	if err := dst.SetSlotNode(ctx, m.Slot, m.TargetID); err != nil {
		return err
	}
	if err := src.SetSlotNode(ctx, m.Slot, m.TargetID); err != nil {
		return err
	}
	for _, pod := range primaries {
		if pod == m.Source || pod == m.Target {
			continue
		}
		// Best effort: the other primaries learn the owner by gossip anyway; telling them
		// shortens the time their clients are redirected twice.
		if c, err := node(pod); err == nil {
			_ = c.SetSlotNode(ctx, m.Slot, m.TargetID)
		}
	}
	return nil
}

// livePrimaries are the pods of the live nodes that said they are primaries, by name.
func livePrimaries(obs *observation) []string {
	var out []string
	for _, p := range obs.snapshot.LivePods() {
		if p.Node != nil && p.Node.Reachable && p.Node.Primary {
			out = append(out, p.Name)
		}
	}
	return out
}

// migrators dials, for one batch of slot moves, a client per source node authenticated as
// MigrationUser, the only system user with key access: MIGRATE runs under it on the source and
// its AUTH2 on the target. They are closed when the batch ends, so no connection with key access
// outlives a move.
type migrators struct {
	obs   *observation
	creds valkey.Credentials
	mu    sync.Mutex
	open  map[string]*valkey.Client
}

func migrator(obs *observation, creds valkey.Credentials) *migrators {
	return &migrators{obs: obs, creds: creds, open: map[string]*valkey.Client{}}
}

func (m *migrators) get(pod string) (*valkey.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.open[pod]; ok {
		return c, nil
	}
	p, ok := m.obs.pods[pod]
	if !ok || p.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP", pod)
	}
	c, err := valkey.NewClient(nodeAddr(p.Status.PodIP), m.creds)
	if err != nil {
		return nil, err
	}
	m.open[pod] = c
	return c, nil
}

func (m *migrators) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pod, c := range m.open {
		c.Close()
		delete(m.open, pod)
	}
}
