package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/valkey"
)

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
	node := func(string) (*valkey.Client, error) { return nil, gone }
	mig := migrator(nil, nil, valkey.Credentials{}, valkey.Credentials{})
	mig.addrOf = func(string) (string, error) { calls.Add(1); return "", gone }
	err := moveSlots(context.Background(), zap.NewNop(), node, mig, func(string) string { return "" }, a, nil)
	if !errors.Is(err, gone) {
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

func TestMigratorPoolFollowsMaxclients(t *testing.T) {
	for _, c := range []struct {
		maxclients string
		want       int
	}{
		{"", migratorPool},
		{"10000", migratorPool},
		{"48", 6},
		{" 200 ", 25},
		{"7", 1},
		{"0", migratorPool},
		{"lots", migratorPool},
	} {
		if got := migratorPoolFor(c.maxclients); got != c.want {
			t.Errorf("maxclients %q: pool %d, want %d", c.maxclients, got, c.want)
		}
	}
}
