package mover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gomomento/valkey-operator/acl"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// The mover against scripted nodes (valkeytest): the commands each move sends, to which node,
// as which user, in which order. That the moves move a real cluster's keys is the end-to-end
// reshard tests' to show (tests/e2e/reshard_test.go, valkey9_test.go).

// scripted is a fleet of scripted nodes, pod a at 10.0.0.1 and pod b at 10.0.0.2 (node ids
// id-a, id-b), and a mover that reaches them through it.
type scripted struct {
	fleet *valkeytest.Fleet
	mover Mover
	logs  *observer.ObservedLogs
	log   *zap.Logger
}

var ips = map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}

func addr(pod string) string { return net.JoinHostPort(ips[pod], "6379") }

func newScripted(t *testing.T, valkeyVersion string) *scripted {
	t.Helper()
	s := &scripted{fleet: valkeytest.New()}
	core, logs := observer.New(zap.DebugLevel)
	s.log, s.logs = zap.New(core), logs
	dial := valkey.Dialer(s.fleet.Dial)
	var mu sync.Mutex
	clients := map[string]*valkey.Client{}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	for pod := range ips {
		s.fleet.Node(addr(pod)).On("INFO", valkeytest.Str("# Server\r\nvalkey_version:"+valkeyVersion+"\r\n"))
	}
	s.mover = Mover{
		Nodes: Nodes{
			Client: func(pod string) (*valkey.Client, error) {
				mu.Lock()
				defer mu.Unlock()
				if c, ok := clients[pod]; ok {
					return c, nil
				}
				c, err := dial.NewClient(addr(pod), valkey.Credentials{Username: "operator", Password: "opw"})
				if err == nil {
					clients[pod] = c
				}
				return c, err
			},
			IP: func(pod string) string { return ips[pod] },
		},
		Dial:      dial,
		Migration: valkey.Credentials{Username: acl.MigrationUser, Password: "mpw"},
		Control:   valkey.Credentials{Username: "operator", Password: "opw"},
	}
	return s
}

// holds makes pod's node hold keys of each slot: GETKEYSINSLOT answers them until a MIGRATE
// has taken them, then none.
func (s *scripted) holds(pod string, keys map[int][]string) {
	var mu sync.Mutex
	left := map[int][]string{}
	for slot, k := range keys {
		left[slot] = slices.Clone(k)
	}
	n := s.fleet.Node(addr(pod))
	n.OnFunc("CLUSTER GETKEYSINSLOT", func(args []string) valkeytest.Reply {
		slot, _ := strconv.Atoi(args[2])
		count, _ := strconv.Atoi(args[3])
		mu.Lock()
		defer mu.Unlock()
		k := left[slot]
		return valkeytest.Strs(k[:min(count, len(k))]...)
	})
	n.OnFunc("MIGRATE", func(args []string) valkeytest.Reply {
		moved := args[slices.Index(args, "KEYS")+1:]
		mu.Lock()
		defer mu.Unlock()
		for slot, k := range left {
			left[slot] = slices.DeleteFunc(k, func(key string) bool { return slices.Contains(moved, key) })
		}
		return valkeytest.OK()
	})
}

// commands are the commands received, as "<pod> <user> <command>", those of slot only when
// slot >= 0 (a command naming it as its third word: CLUSTER SETSLOT, CLUSTER GETKEYSINSLOT), or
// MIGRATE of keys named after it ("k<slot>-…").
func (s *scripted) commands(slot int) []string {
	pods := map[string]string{}
	for pod := range ips {
		pods[addr(pod)] = pod
	}
	var out []string
	for _, c := range s.fleet.Calls() {
		if slot >= 0 {
			mine := len(c.Args) > 2 && c.Args[0] == "CLUSTER" && c.Args[2] == strconv.Itoa(slot)
			if c.Args[0] == "MIGRATE" {
				mine = strings.HasPrefix(c.Args[slices.Index(c.Args, "KEYS")+1], fmt.Sprintf("k%d-", slot))
			}
			if !mine {
				continue
			}
		}
		out = append(out, pods[c.Addr]+" "+c.User+" "+strings.Join(c.Args, " "))
	}
	return out
}

func move(slot int) plan.SlotMove {
	return plan.SlotMove{Slot: slot, Source: "a", SourceID: "id-a", Target: "b", TargetID: "id-b"}
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// A classic move of one slot from a to b, its source holding two keys: valkey-cli's order,
// the slot owned by the target before the source lets it go, and the keys moved under
// acl.MigrationUser alone (the operator's own user has no key access).
func TestClassicMoveCommands(t *testing.T) {
	s := newScripted(t, "8.0.1")
	s.holds("a", map[int][]string{5: {"k5-1", "k5-2"}})
	moved, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(5)}})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "commands", s.commands(-1), []string{
		"a operator INFO server", // a runs 8.0.1: no atomic move, b is not asked
		"b operator CLUSTER SETSLOT 5 IMPORTING id-a",
		"a operator CLUSTER SETSLOT 5 MIGRATING id-b",
		"a operator CLUSTER GETKEYSINSLOT 5 1000",
		"a _momento_migrate MIGRATE 10.0.0.2 6379  0 5000 REPLACE AUTH2 _momento_migrate mpw KEYS k5-1 k5-2",
		"a operator CLUSTER GETKEYSINSLOT 5 1000",
		"b operator CLUSTER SETSLOT 5 NODE id-b",
		"a operator CLUSTER SETSLOT 5 NODE id-b",
	})
	if moved != (Tally{Slots: 1, Keys: 2}) {
		t.Errorf("tally %+v, want 1 slot, 2 keys", moved)
	}
	lines := s.logs.FilterMessage(logging.MsgMovingSlots).AllUntimed()
	if len(lines) != 1 {
		t.Fatalf("%d %q lines, want 1", len(lines), logging.MsgMovingSlots)
	}
	f := lines[0].ContextMap()
	if f[logging.FieldSlots] != int64(1) || f[logging.FieldMethod] != logging.MethodClassic || f[logging.FieldTarget] != "b" {
		t.Errorf("fields %v", f)
	}
}

// Many slots at once: each slot's own commands keep their order, however the slots in flight
// interleave, a slot of more than one batch of keys is drained batch by batch, and the batch
// says once what it moved.
func TestClassicMoveManySlots(t *testing.T) {
	s := newScripted(t, "8.0.1")
	keys := map[int][]string{}
	var a plan.MoveSlots
	for slot := range 3 * slotsInFlight {
		for k := range slot % 3 {
			keys[slot] = append(keys[slot], fmt.Sprintf("k%d-%d", slot, k))
		}
		a.Moves = append(a.Moves, move(slot))
	}
	big := 2*migrateBatchKeys + 1
	keys[7] = nil
	for k := range big {
		keys[7] = append(keys[7], fmt.Sprintf("k7-%d", k))
	}
	s.holds("a", keys)
	moved, err := s.mover.Move(context.Background(), s.log, a)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for slot := range 3 * slotsInFlight {
		want := []string{
			fmt.Sprintf("b operator CLUSTER SETSLOT %d IMPORTING id-a", slot),
			fmt.Sprintf("a operator CLUSTER SETSLOT %d MIGRATING id-b", slot),
		}
		for k := keys[slot]; len(k) > 0; k = k[min(migrateBatchKeys, len(k)):] {
			want = append(want, fmt.Sprintf("a operator CLUSTER GETKEYSINSLOT %d 1000", slot),
				"a _momento_migrate MIGRATE 10.0.0.2 6379  0 5000 REPLACE AUTH2 _momento_migrate mpw KEYS "+strings.Join(k[:min(migrateBatchKeys, len(k))], " "))
		}
		want = append(want, fmt.Sprintf("a operator CLUSTER GETKEYSINSLOT %d 1000", slot),
			fmt.Sprintf("b operator CLUSTER SETSLOT %d NODE id-b", slot),
			fmt.Sprintf("a operator CLUSTER SETSLOT %d NODE id-b", slot))
		same(t, fmt.Sprintf("slot %d", slot), s.commands(slot), want)
		total += len(keys[slot])
	}
	if moved != (Tally{Slots: len(a.Moves), Keys: total}) {
		t.Errorf("tally %+v, want %d slots, %d keys", moved, len(a.Moves), total)
	}
	if n := len(s.logs.FilterMessage(logging.MsgMovingSlots).AllUntimed()); n != 1 {
		t.Errorf("%d %q lines, want one for the pair", n, logging.MsgMovingSlots)
	}
}

// A source that gave away its last slot became a replica of the taker (Valkey's replica
// migration) and refuses its own SETSLOT NODE: the target owns the slot, the move succeeded.
func TestClassicMoveSourceTurnedReplica(t *testing.T) {
	s := newScripted(t, "8.0.1")
	s.fleet.Node(addr("a")).On("CLUSTER SETSLOT 5 NODE", valkeytest.Err("ERR Please use SETSLOT only with masters."))
	s.holds("a", map[int][]string{})
	moved, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(5)}})
	if err != nil || moved.Slots != 1 {
		t.Fatalf("moved %+v, %v; want the slot moved", moved, err)
	}
}

// The target refusing the slot fails the move with the slot, the pair and Valkey's reason,
// and nothing after it is sent for the slot.
func TestClassicMoveFailure(t *testing.T) {
	s := newScripted(t, "8.0.1")
	s.fleet.Node(addr("b")).On("CLUSTER SETSLOT 6 IMPORTING", valkeytest.Err("ERR Target instance is not a primary"))
	s.holds("a", map[int][]string{})
	moved, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(6)}})
	if err == nil || !strings.Contains(err.Error(), "slot 6 from a to b") || !strings.Contains(err.Error(), "not a primary") {
		t.Fatalf("err %v", err)
	}
	if moved.Slots != 0 {
		t.Errorf("tally %+v, want no slot", moved)
	}
	same(t, "slot 6", s.commands(6), []string{"b operator CLUSTER SETSLOT 6 IMPORTING id-a"})
}

// enforcing is the ACL LIST of a node whose replication user has the slot import rules.
func enforcing(t *testing.T) valkeytest.Reply {
	line := "user " + acl.ReplicationUser + " " + strings.Join(acl.ReplicationRule(true), " ")
	if !acl.EnforcesSlotImport([]string{line}) {
		t.Fatalf("%q does not enforce the slot import rules", line)
	}
	return valkeytest.Strs(line)
}

// An atomic move between two Valkey 9 nodes that enforce the slot import rules: one CLUSTER
// MIGRATESLOTS of the pair's slots as ranges, started once neither node has a migration
// running, and awaited until the source reports it ended.
func TestAtomicMoveCommands(t *testing.T) {
	s := newScripted(t, "9.1.2")
	var started atomic.Bool
	for pod := range ips {
		s.fleet.Node(addr(pod)).On("ACL LIST", enforcing(t))
	}
	s.fleet.Node(addr("a")).OnFunc("CLUSTER MIGRATESLOTS", func([]string) valkeytest.Reply {
		started.Store(true)
		return valkeytest.OK()
	})
	s.fleet.Node(addr("a")).OnFunc("CLUSTER GETSLOTMIGRATIONS", func([]string) valkeytest.Reply {
		if !started.Load() {
			return valkeytest.Array()
		}
		return valkeytest.Array(valkeytest.Map("name", "job-1", "operation", "EXPORT", "slot_ranges", "5-7 9-9",
			"target_node", "id-b", "source_node", "id-a", "state", "success", "message", ""))
	})
	s.fleet.Node(addr("b")).On("CLUSTER GETSLOTMIGRATIONS", valkeytest.Array())
	a := plan.MoveSlots{Moves: []plan.SlotMove{move(5), move(6), move(7), move(9)}}
	moved, err := s.mover.Move(context.Background(), s.log, a)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "commands", s.commands(-1), []string{
		"a operator INFO server",
		"a operator ACL LIST",
		"b operator INFO server",
		"b operator ACL LIST",
		"a operator CLUSTER GETSLOTMIGRATIONS",
		"b operator CLUSTER GETSLOTMIGRATIONS",
		"a operator CLUSTER MIGRATESLOTS SLOTSRANGE 5 7 9 9 NODE id-b",
		"a operator CLUSTER GETSLOTMIGRATIONS",
	})
	if moved != (Tally{Slots: 4}) {
		t.Errorf("tally %+v, want 4 slots", moved)
	}
	lines := s.logs.FilterMessage(logging.MsgMovingSlots).AllUntimed()
	if len(lines) != 1 || lines[0].ContextMap()[logging.FieldMethod] != logging.MethodAtomic {
		t.Errorf("want one %q line, method atomic: %v", logging.MsgMovingSlots, lines)
	}
}

// A Valkey 9 node that cannot run CLUSTER MIGRATESLOTS after all (an ACL that predates it)
// moves its pair's slots with the classic protocol in the same batch.
func TestAtomicMoveFallsBackToClassic(t *testing.T) {
	s := newScripted(t, "9.1.2")
	for pod := range ips {
		s.fleet.Node(addr(pod)).On("ACL LIST", enforcing(t)).On("CLUSTER GETSLOTMIGRATIONS", valkeytest.Array())
	}
	s.fleet.Node(addr("a")).On("CLUSTER MIGRATESLOTS", valkeytest.Err("NOPERM User operator has no permissions to run the 'cluster|migrateslots' command"))
	s.holds("a", map[int][]string{5: {"k5-1"}})
	moved, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(5)}})
	if err != nil {
		t.Fatal(err)
	}
	if moved != (Tally{Slots: 1, Keys: 1}) {
		t.Errorf("tally %+v, want 1 slot, 1 key", moved)
	}
	same(t, "slot 5, after the refused MIGRATESLOTS", s.commands(5), []string{
		"b operator CLUSTER SETSLOT 5 IMPORTING id-a",
		"a operator CLUSTER SETSLOT 5 MIGRATING id-b",
		"a operator CLUSTER GETKEYSINSLOT 5 1000",
		"a _momento_migrate MIGRATE 10.0.0.2 6379  0 5000 REPLACE AUTH2 _momento_migrate mpw KEYS k5-1",
		"a operator CLUSTER GETKEYSINSLOT 5 1000",
		"b operator CLUSTER SETSLOT 5 NODE id-b",
		"a operator CLUSTER SETSLOT 5 NODE id-b",
	})
	if lines := s.logs.FilterMessage(logging.MsgMovingSlots).AllUntimed(); len(lines) != 2 || lines[1].ContextMap()[logging.FieldMethod] != logging.MethodClassic {
		t.Errorf("want the refusal at debug, then one line with method classic: %v", lines)
	}
}

// Settling a batch an earlier pass left open is classic, whatever the nodes run: only it
// resumes a half-done SETSLOT move.
func TestSettleIsClassic(t *testing.T) {
	s := newScripted(t, "9.1.2")
	s.holds("a", map[int][]string{})
	if _, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(5)}, Settle: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.commands(-1) {
		if strings.Contains(c, "INFO") || strings.Contains(c, "MIGRATESLOTS") {
			t.Errorf("a settle sent %q", c)
		}
	}
}

// Closing open slots: SETSLOT NODE where the node already serves the slot, else STABLE, in
// order, one `closing slot` line each; the first failure stops the batch.
func TestClose(t *testing.T) {
	s := newScripted(t, "8.0.1")
	a := plan.CloseSlots{Closes: []plan.CloseSlot{{Pod: "a", Slot: 5, Owner: "id-a"}, {Pod: "b", Slot: 6}, {Pod: "a", Slot: 7}}}
	if err := s.mover.Close(context.Background(), s.log, a); err != nil {
		t.Fatal(err)
	}
	same(t, "commands", s.commands(-1), []string{
		"a operator CLUSTER SETSLOT 5 NODE id-a",
		"b operator CLUSTER SETSLOT 6 STABLE",
		"a operator CLUSTER SETSLOT 7 STABLE",
	})
	if n := len(s.logs.FilterMessage(logging.MsgClosingSlot).AllUntimed()); n != 3 {
		t.Errorf("%d %q lines, want 3", n, logging.MsgClosingSlot)
	}
	s.fleet.Reset()
	s.fleet.Node(addr("b")).On("CLUSTER SETSLOT 6 STABLE", valkeytest.Err("ERR boom"))
	if err := s.mover.Close(context.Background(), s.log, a); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v, want the refusal", err)
	}
	if n := len(s.fleet.Calls()); n != 2 {
		t.Errorf("%d commands sent, want 2: the batch stops at the failure", n)
	}
}

// The first failed move stops the batch: a node gone mid-batch (a primary killed) must end the
// pass soon, so that the next one observes it and fails its shard over, instead of every other
// pair moving slots until the pass budget runs out (TestReshardSourceKilled: 8.2 s of refused
// writes on the dead source's slots).
func TestMoveSlotsStopsAtTheFirstFailure(t *testing.T) {
	var a plan.MoveSlots
	for i := range 400 {
		src := fmt.Sprintf("src-%d", i%2)
		a.Moves = append(a.Moves, plan.SlotMove{Slot: i, Source: src, SourceID: "id-" + src, Target: "dst", TargetID: "id-dst"})
	}
	var calls atomic.Int32
	gone := errors.New("connection refused")
	m := Mover{Nodes: Nodes{
		Client: func(string) (*valkey.Client, error) { return nil, gone },
		IP:     func(string) string { calls.Add(1); return "" }, // no IP: every dial fails
	}}
	_, err := m.Move(context.Background(), zap.NewNop(), a)
	if err == nil || !strings.Contains(err.Error(), "has no IP") {
		t.Fatalf("want the failure returned, got %v", err)
	}
	// At most the slots already handed to a worker when the first failure came.
	if n := calls.Load(); n > 2*slotsInFlight+2 {
		t.Fatalf("%d of %d moves tried after the first failed", n, len(a.Moves))
	}
}

// A source's SETSLOT NODE that fails because Valkey made the source a replica (it gave away its
// last slot) is no failure of the move; any other error is.
func TestTurnedReplica(t *testing.T) {
	for msg, want := range map[string]bool{
		"cluster setslot 5 node abc on 10.0.0.1:6379: UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)": true,
		"cluster setslot 5 node abc on 10.0.0.1:6379: ERR Please use SETSLOT only with masters.":                                                    true,
		"cluster setslot 5 node abc on 10.0.0.1:6379: ERR Can't assign hashslot 5 to a different node while I still hold keys for this hash slot.":  false,
		"dial tcp 10.0.0.1:6379: connect: connection refused":                                                                                       false,
	} {
		if got := turnedReplica(errors.New(msg)); got != want {
			t.Errorf("turnedReplica(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestPoolForFollowsMaxclients(t *testing.T) {
	for _, c := range []struct {
		maxclients int
		want       int
	}{
		{0, migratorPool},
		{10000, migratorPool},
		{48, 6},
		{200, 25},
		{7, 1},
		{-1, migratorPool},
	} {
		if got := PoolFor(c.maxclients); got != c.want {
			t.Errorf("maxclients %d: pool %d, want %d", c.maxclients, got, c.want)
		}
	}
}

// TestMoveRecoversPanics: a goroutine of the batch that panics (a classic move's worker, an
// atomic move's) fails its pair with the panic, logged at ERROR with its stack, and the batch
// returns; before, the panic of a mover goroutine ended the process.
func TestMoveRecoversPanics(t *testing.T) {
	t.Run("classic", func(t *testing.T) {
		s := newScripted(t, "8.0.1")
		s.holds("a", map[int][]string{6: {"k6-a"}})
		s.mover.IP = func(string) string { panic("boom in a worker") }
		_, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(6), move(7)}})
		var pe *logging.PanicError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "boom in a worker") {
			t.Fatalf("err %v", err)
		}
		lines := s.logs.FilterMessage(logging.MsgNodeStepPanicked).AllUntimed()
		if len(lines) == 0 || lines[0].ContextMap()[logging.FieldPod] != "a" || !strings.Contains(lines[0].ContextMap()[logging.FieldStack].(string), "moveSlot") {
			t.Errorf("want a %q line for pod a with the stack: %v", logging.MsgNodeStepPanicked, lines)
		}
	})
	t.Run("atomic", func(t *testing.T) {
		s := newScripted(t, "9.1.2")
		for pod := range ips {
			s.fleet.Node(addr(pod)).On("ACL LIST", enforcing(t))
		}
		client := s.mover.Client
		versions := 0
		s.mover.Client = func(pod string) (*valkey.Client, error) {
			if versions++; versions > 2 { // the version checks, then the move itself
				panic("boom in an atomic move")
			}
			return client(pod)
		}
		_, err := s.mover.Move(context.Background(), s.log, plan.MoveSlots{Moves: []plan.SlotMove{move(5)}})
		if err == nil || !strings.Contains(err.Error(), "boom in an atomic move") {
			t.Fatalf("err %v", err)
		}
	})
}
