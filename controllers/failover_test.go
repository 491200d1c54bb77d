package controllers

import (
	"reflect"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/fsm"
)

// status.failover round-trips: what one pass records is what the next pass (or a restarted
// operator) reads back, to the second (the API keeps seconds).
func TestFailoverStatusRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 500_000_000, time.UTC)
	for _, f := range []*fsm.FailoverIntent{
		nil,
		{Shard: 2, Pod: "vc-1a2b3", PrimaryID: "0123456789abcdef0123456789abcdef01234567", Force: true, StartedAt: at},
		{Shard: 0, Pod: "vc-4c5d6", PrimaryID: "89abcdef0123456789abcdef0123456789abcdef", StartedAt: at},
	} {
		got := failoverIntent(failoverStatus(f))
		var want *fsm.FailoverIntent
		if f != nil {
			w := *f
			w.StartedAt = at.Truncate(time.Second)
			want = &w
		}
		if got != nil {
			got.StartedAt = got.StartedAt.UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %+v: got %+v", f, got)
		}
	}
}
