// Package mover moves slots between Valkey nodes: the classic protocol (CLUSTER SETSLOT
// IMPORTING and MIGRATING, GETKEYSINSLOT and MIGRATE until the slot is empty, SETSLOT NODE),
// CLUSTER MIGRATESLOTS between Valkey 9 nodes, and closing the slots an interrupted move left
// open. It runs a plan.MoveSlots or plan.CloseSlots action the executor hands it.
//
// Beside the client rather than in it: package valkey sends one command to one node and knows
// nothing of plans or of the log contract; the mover is a protocol over many nodes at once,
// with its own connections for the length of a batch, and says what it moved in the contract's
// words (logging.MsgMovingSlots, logging.MsgClosingSlot). It knows nodes by pod name and asks
// the caller (Nodes) for their addresses and the pass's clients, so that it needs nothing of
// Kubernetes, and a test can run it against scripted nodes (valkeytest) through valkey.Dialer,
// the one seam between the operator and Valkey.
package mover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gomomento/valkey-operator/acl"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/version"
)

// Nodes is how the mover reaches the nodes of a batch, which it knows by pod name: what only
// the caller (the executor, which reads Kubernetes) can say.
type Nodes struct {
	// Client is the pass's client of a pod's node: the version and ACL checks, the atomic
	// moves and the closes run on it.
	Client func(pod string) (*valkey.Client, error)
	// IP is a pod's IP ("" when it has none): the classic moves dial its node on it, and
	// MIGRATE sends the keys there.
	IP func(pod string) string
	// Pool is how many connections a batch may open to a pod's node (PoolFor); nil for
	// migratorPool.
	Pool func(pod string) int
}

// Mover runs slot moves for one cluster.
type Mover struct {
	Nodes
	// Dial opens the connections of the classic moves (the reconciler's valkey.Dialer; nil
	// dials real nodes).
	Dial valkey.Dialer
	// Migration are acl.MigrationUser's credentials, Control the operator's.
	Migration, Control valkey.Credentials
}

// Tally is what a batch moved, for the metrics (valkey_cluster_slots_moved_total,
// valkey_cluster_keys_moved_total): counted as the moves land, a batch that failed included.
type Tally struct{ Slots, Keys int }

// Move runs a batch of slot moves (moveSlots) and says what moved.
func (m Mover) Move(ctx context.Context, log *zap.Logger, a plan.MoveSlots) (Tally, error) {
	var tally moveTally
	err := moveSlots(ctx, log, m.Client, m.migrators(), m.IP, a, &tally)
	return Tally{Slots: int(tally.slots.Load()), Keys: int(tally.keys.Load())}, err
}

// Close closes the open slots of a, in order, each on its pod's node: CLUSTER SETSLOT NODE
// owner when the node already serves the slot, else SETSLOT STABLE. It stops at the first
// failure; what is left open is closed again next pass.
func (m Mover) Close(ctx context.Context, log *zap.Logger, a plan.CloseSlots) error {
	for _, cl := range a.Closes {
		c, err := m.Client(cl.Pod)
		if err != nil {
			return err
		}
		log.Info(logging.MsgClosingSlot, logging.Pod(cl.Pod), zap.Int(logging.FieldSlot, cl.Slot), logging.Node(cl.Owner))
		if cl.Owner != "" {
			err = c.SetSlotNode(ctx, cl.Slot, cl.Owner)
		} else {
			err = c.SetSlotStable(ctx, cl.Slot)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// migrators are the batch's own connections (see migrators).
func (m Mover) migrators() *migrators {
	addrOf := func(pod string) (string, error) {
		ip := m.IP(pod)
		if ip == "" {
			return "", fmt.Errorf("pod %s has no IP", pod)
		}
		return net.JoinHostPort(ip, strconv.Itoa(resources.ClientPort)), nil
	}
	poolOf := m.Pool
	if poolOf == nil {
		poolOf = func(string) int { return migratorPool }
	}
	return &migrators{dialer: m.Dial, addrOf: addrOf, creds: m.Migration, ctl: m.Control, poolOf: poolOf, open: map[string]*valkey.Client{}, pooled: map[string]*valkey.Client{}}
}

const (
	// migrateBatchKeys is how many keys one GETKEYSINSLOT / MIGRATE round moves: measured here,
	// 1000-key batches with many slots in flight moved 85-91 k keys/s on 2 cores.
	migrateBatchKeys = 1000
	// migrateTimeout is MIGRATE's own timeout for one batch, in the source node's terms.
	migrateTimeout = 5 * time.Second
	// moveReserve is the part of the pass budget kept for the moves already started to close and
	// for the status: no new slot is opened with less than this left.
	moveReserve = 3 * time.Second
	// slotsInFlight is how many slots of one (source, target) pair move at once. Each runs its
	// commands on a connection of its own (migrators.control): on Valkey 8 a primary with
	// replicas answers each CLUSTER SETSLOT once its replicas acknowledged it, and the waits of
	// concurrent moves overlap. Measured here, one pair, primaries with one replica each, under
	// load: pipelined on one connection with 16 in flight 66-75 slots/s; pooled, 16 in flight
	// 85-135, 48 in flight 69-165.
	slotsInFlight = 32
)

// moveSlots runs a batch of slot moves: the (source, target) pairs concurrently, each pair's
// slots one after the other. A slot is opened only while the pass has more than moveReserve
// left and no move of the batch failed; one cut short stays open and the next pass settles it.
// node gives a node's client by pod; ipOf its IP.
func moveSlots(ctx context.Context, log *zap.Logger, node func(string) (*valkey.Client, error), mig *migrators, ipOf func(string) string, a plan.MoveSlots, tally *moveTally) error {
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
	failed := make([]int, len(order)) // classic moves that failed, per pair
	method := make([]string, len(order))
	var mu sync.Mutex
	// The first failed move stops the batch: no pair opens another slot, the slots in flight
	// finish (or fail), and the pass ends. A failure is most often a node gone (a primary killed
	// mid-move): the next pass must observe it and fail its shard over at once, not after every
	// other pair used up the pass budget (measured: a source killed mid-batch left its slots
	// refusing writes for 8.2 s, the rest of the pass). What is left open is settled next pass.
	stop := make(chan struct{})
	var stopOnce sync.Once
	// fail records err as a failure of pair i (its first error is kept) and stops the batch.
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		stopOnce.Do(func() { close(stop) })
		if failed[i]++; errs[i] == nil {
			errs[i] = err
		}
	}
	// recovered, deferred by every goroutine of the batch, turns its panic into a failure of
	// pair i, logged with its stack: nothing else recovers the goroutines a reconcile starts, and
	// one that panics would end the operator for every team.
	panicked := func(i int, r any) {
		p := logging.Recovered(r)
		logging.LogPanic(log, order[i][0], p)
		fail(i, fmt.Errorf("slots from %s to %s: %w", order[i][0], order[i][1], p))
	}
	recovered := func(i int) {
		if r := recover(); r != nil {
			panicked(i, r)
		}
	}
	// classic moves pair i's slots with the classic protocol, slotsInFlight at a time, and
	// returns when they are done, a move failed, or the pass has no time left for another.
	classic := func(i int, moves []plan.SlotMove) {
		method[i] = logging.MethodClassic
		next := make(chan plan.SlotMove)
		go func() {
			defer close(next)
			defer recovered(i)
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
				defer recovered(i)
				for m := range next {
					keys, err := moveSlot(ctx, mig, ipOf, m)
					tally.add(0, keys)
					if err != nil {
						// The first error only, and how many more: the moves in flight when it
						// came usually fail alike (NOREPLICAS from a slow replica, say), and one
						// line per slot made a reconcile error of dozens of lines.
						fail(i, fmt.Errorf("slot %d from %s to %s: %w", m.Slot, m.Source, m.Target, err))
						continue
					}
					mu.Lock()
					moved[i]++
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
				defer recovered(i)
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
			cur := atomicByTarget[target][0]
			defer func() {
				if r := recover(); r != nil {
					panicked(cur, r)
				}
			}()
			for _, i := range atomicByTarget[target] {
				cur = i
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
		if failed[i] > 1 {
			errs[i] = fmt.Errorf("%w (and %d more slots of the pair)", errs[i], failed[i]-1)
		}
		tally.add(moved[i], 0)
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
		if ver, err := c.Version(ctx); err == nil && version.Parse(ver).AtomicSlotMigration() {
			list, err := c.ACLList(ctx)
			ok = err == nil && acl.EnforcesSlotImport(list)
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

// moveTally counts what a batch moved, for the metrics (valkey_cluster_slots_moved_total,
// valkey_cluster_keys_moved_total); a nil *moveTally counts nothing.
type moveTally struct{ slots, keys atomic.Int64 }

func (t *moveTally) add(slots, keys int) {
	if t != nil {
		t.slots.Add(int64(slots))
		t.keys.Add(int64(keys))
	}
}

// moveSlot moves one slot with the classic protocol. Every step can be repeated, so a move
// resumed after a crash runs them all again.
func moveSlot(ctx context.Context, mig *migrators, ipOf func(string) string, m plan.SlotMove) (moved int, err error) {
	src, err := mig.control(m.Source)
	if err != nil {
		return 0, err
	}
	mover, err := mig.get(m.Source)
	if err != nil {
		return 0, err
	}
	dst, err := mig.control(m.Target)
	if err != nil {
		return 0, err
	}
	// A move resumed after an interruption may find either half done: the target already owning
	// the slot (its SETSLOT NODE ran), or the source no longer owning it. Neither is an error:
	// whatever keys the source still holds are moved, then both are told the owner.
	if err := dst.SetSlotImporting(ctx, m.Slot, m.SourceID); err != nil && !strings.Contains(err.Error(), "already the owner") {
		return 0, err
	}
	if err := src.SetSlotMigrating(ctx, m.Slot, m.TargetID); err != nil && !strings.Contains(err.Error(), "not the owner") {
		return 0, err
	}
	ip := ipOf(m.Target)
	// The keys are drained until GETKEYSINSLOT finds none. Stopping at the first short batch
	// would save the source a round trip per slot (a MIGRATING source creates no key of the
	// slot: it answers ASK or TRYAGAIN), but nothing would catch a key that got there anyway:
	// Valkey 8.0.1 does not refuse SETSLOT NODE on a source that still holds keys of the slot,
	// it deletes them ("Deleting keys in dirty slot", measured on bare 8.0.1 nodes).
	for {
		keys, err := src.GetKeysInSlot(ctx, m.Slot, migrateBatchKeys)
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			break
		}
		// REPLACE: the source is authoritative for every key it still holds (a key written on
		// the target during the move was absent from the source, by ASK's rule).
		if err := mover.MigrateKeys(ctx, ip, resources.ClientPort, keys, migrateTimeout, true); err != nil {
			return moved, err
		}
		moved += len(keys)
	}
	// The target first: once it owns the slot, the source's SETSLOT NODE cannot leave the slot
	// without an owner.
	if err := dst.SetSlotNode(ctx, m.Slot, m.TargetID); err != nil {
		return moved, err
	}
	err = src.SetSlotNode(ctx, m.Slot, m.TargetID)
	if err != nil && turnedReplica(err) {
		// The target owns the slot. A source that gave away its last slot is made a replica of
		// the taker by Valkey itself (cluster-allow-replica-migration), which drops every open
		// slot of its own: nothing is left to close, and the drain did not fail (seen on every
		// scale-in, as a WARN with up to 13 such slots).
		err = nil
	}
	// The other primaries are not told (valkey-cli tells them): the target's SETSLOT NODE bumps
	// its config epoch and broadcasts a PONG to every node at once, so they learn the owner
	// within a round trip anyway, and on Valkey 8 each SETSLOT on a primary waits for its
	// replicas: two more waits per slot on every other source of a batch.
	return moved, err
}

// turnedReplica reports whether err is a SETSLOT that failed because the node is no longer a
// primary: refused ("Please use SETSLOT only with masters"), or unblocked while it waited for its
// replicas ("UNBLOCKED force unblock from blocking operation, instance state changed (master ->
// replica?)").
func turnedReplica(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "only with masters") || (strings.Contains(msg, "UNBLOCKED") && strings.Contains(msg, "replica"))
}

// migrators dials, for one batch of slot moves, the clients of the classic protocol, closed when
// the batch ends:
//   - per source node, a pooled client authenticated as acl.MigrationUser, the only system user
//     with key access: MIGRATE runs under it on the source and its AUTH2 on the target, so no
//     connection with key access outlives a batch (valkey-go gives each MIGRATE in flight a
//     connection of its own: the pool caps them, migratorPoolFor);
//   - per node, a pooled client as the operator (NewPooledClient) for the CLUSTER SETSLOT and
//     GETKEYSINSLOT of the slots in flight. The pass's own client pipelines every command on one
//     connection, and on Valkey 8 a primary with replicas answers SETSLOT only once they
//     acknowledged it: the moves in flight queued behind each other's waits (measured 3 -> 4
//     shards on 8.0.1 with replicas: ~100 slots/s, with 48 slots in flight).
type migrators struct {
	// addrOf is the node address of a pod ("" and an error when it has none).
	addrOf func(pod string) (string, error)
	// dialer opens the connections (the reconciler's Dialer).
	dialer valkey.Dialer
	creds  valkey.Credentials
	ctl    valkey.Credentials
	// poolOf is how many connections the pooled client of a pod may open (migratorPool, less
	// on a node with a low maxclients).
	poolOf func(pod string) int
	mu     sync.Mutex
	open   map[string]*valkey.Client
	pooled map[string]*valkey.Client
}

// migratorPool is how many connections a batch may open to one node: every slot in flight on
// it can wait on its own connection (a node is the source or target of a few pairs at once).
const migratorPool = 4 * slotsInFlight

// PoolFor is the pool of each of a batch's two clients of a node (the operator's and
// acl.MigrationUser's) for a node started with maxclients (its ValkeyNode's
// resources.ValkeySettings; 0 when unset or unreadable, Valkey's 10000): an eighth of it at
// most, so that the two take a quarter and a scale-out never takes the connections the
// applications need. valkey-go runs MIGRATE (it has a timeout) on a pooled connection of its
// own too, so an uncapped acl.MigrationUser client opened one per slot in flight. Measured with
// maxclients 48 uncapped: 8702 connections refused on the target, client writes reset, a 3 -> 4
// in 4 min 13 s instead of 29 s (break test); the operator's pool alone capped: 12
// acl.MigrationUser + 15 operator connections on a source at once, still 100-145 refused per
// source (TestReshardLowMaxclients). Past the cap, moves wait for a free connection of the pool
// instead of opening one.
func PoolFor(maxclients int) int {
	if maxclients <= 0 {
		return migratorPool
	}
	return max(1, min(migratorPool, maxclients/8))
}

// get is the acl.MigrationUser client of pod.
func (m *migrators) get(pod string) (*valkey.Client, error) {
	return m.dial(m.open, pod, func(addr string) (*valkey.Client, error) {
		return m.dialer.NewPooledClient(addr, m.creds, m.poolOf(pod))
	})
}

// control is the operator's pooled client of pod, on TLS clusters too. There every pooled
// connection is a TLS handshake, paid again for every batch, so TLS clusters first kept the
// pass's one connection; but their SETSLOTs then queued behind each other's replica waits and
// ran into their timeouts under load: the chaos suite's fixed seed had a TLS 3 -> 4 still
// moving slots after 6 min at load 25, 15 slots/s. TestTLSReshard, the two movers side by side
// at load 37: 3 -> 4 in 2 min 18 s pooled, 3 min 32 s on the one connection.
func (m *migrators) control(pod string) (*valkey.Client, error) {
	return m.dial(m.pooled, pod, func(addr string) (*valkey.Client, error) { return m.dialer.NewPooledClient(addr, m.ctl, m.poolOf(pod)) })
}

func (m *migrators) dial(open map[string]*valkey.Client, pod string, dial func(string) (*valkey.Client, error)) (*valkey.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := open[pod]; ok {
		return c, nil
	}
	addr, err := m.addrOf(pod)
	if err != nil {
		return nil, err
	}
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	open[pod] = c
	return c, nil
}

func (m *migrators) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, open := range []map[string]*valkey.Client{m.open, m.pooled} {
		for pod, c := range open {
			c.Close()
			delete(open, pod)
		}
	}
}
