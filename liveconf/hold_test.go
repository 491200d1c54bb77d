package liveconf

import (
	"maps"
	"slices"
	"testing"
)

func TestHold(t *testing.T) {
	rec := func(kv ...string) map[string]string {
		m := map[string]string{"appendonly": "no"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name      string
		desired   map[string]string
		running   []map[string]string
		confirmed string
		held      []Held
		effective map[string]string // nil: desired
	}{
		{name: "a cluster with no running node holds nothing",
			desired: rec("maxmemory", "4mb")},
		{name: "an increase is applied",
			desired: rec("maxmemory", "200mb"), running: []map[string]string{rec("maxmemory", "100mb")}},
		{name: "the same value written otherwise is no change",
			desired: rec("maxmemory", "102400kb"), running: []map[string]string{rec("maxmemory", "100mb")}},
		{name: "a decrease is held at the running value",
			desired: rec("maxmemory", "4mb", "hz", "20"), running: []map[string]string{rec("maxmemory", "100mb"), rec("maxmemory", "100mb")},
			held:      []Held{{Key: "maxmemory", Running: "100mb", Want: "4mb", Reason: HoldLower}},
			effective: rec("maxmemory", "100mb", "hz", "20")},
		{name: "a first limit on nodes without one is a decrease",
			desired: rec("maxmemory", "4mb"), running: []map[string]string{rec()},
			held:      []Held{{Key: "maxmemory", Want: "4mb", Reason: HoldLower}},
			effective: rec()},
		{name: "an explicit 0 (no limit) is an increase",
			desired: rec("maxmemory", "0"), running: []map[string]string{rec("maxmemory", "100mb")}},
		{name: "a decrease confirmed in another spelling is applied",
			desired: rec("maxmemory", "4mb"), running: []map[string]string{rec("maxmemory", "100mb")}, confirmed: "maxmemory=4194304"},
		{name: "a confirmation of another value confirms nothing",
			desired: rec("maxmemory", "2mb"), running: []map[string]string{rec("maxmemory", "100mb")}, confirmed: "maxmemory=4mb",
			held:      []Held{{Key: "maxmemory", Running: "100mb", Want: "2mb", Reason: HoldLower}},
			effective: rec("maxmemory", "100mb")},
		{name: "nodes that disagree keep the least limiting value",
			desired: rec("maxmemory", "4mb"), running: []map[string]string{rec("maxmemory", "4mb"), rec("maxmemory", "100mb"), rec("maxmemory", "50mb")},
			held:      []Held{{Key: "maxmemory", Running: "100mb", Want: "4mb", Reason: HoldLower}},
			effective: rec("maxmemory", "100mb")},
		{name: "a removal is held, never 0 unasked",
			desired: rec(), running: []map[string]string{rec("maxmemory", "100mb")},
			held:      []Held{{Key: "maxmemory", Running: "100mb", Reason: HoldRemoved}},
			effective: rec("maxmemory", "100mb")},
		{name: "a removal confirmed as maxmemory=0 is applied",
			desired: rec(), running: []map[string]string{rec("maxmemory", "100mb")}, confirmed: "maxmemory=0"},
		{name: "a removal from nodes without a limit is nothing",
			desired: rec(), running: []map[string]string{rec("maxmemory", "0")}},
		{name: "a policy change under a limit is held",
			desired: rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru"), running: []map[string]string{rec("maxmemory", "100mb")},
			held:      []Held{{Key: "maxmemory-policy", Want: "allkeys-lru", Reason: HoldPolicy}},
			effective: rec("maxmemory", "100mb")},
		{name: "a policy removed goes to noeviction: held",
			desired: rec("maxmemory", "100mb"), running: []map[string]string{rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru")},
			held:      []Held{{Key: "maxmemory-policy", Running: "allkeys-lru", Reason: HoldPolicy}},
			effective: rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru")},
		{name: "a policy in another case is no change",
			desired: rec("maxmemory", "100mb", "maxmemory-policy", "ALLKEYS-LRU"), running: []map[string]string{rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru")}},
		{name: "a policy change without a limit evicts nothing",
			desired: rec("maxmemory-policy", "allkeys-lru"), running: []map[string]string{rec()}},
		{name: "a policy change beside a held decrease from no limit is applied (the nodes keep no limit)",
			desired: rec("maxmemory", "4mb", "maxmemory-policy", "allkeys-lru"), running: []map[string]string{rec()},
			held:      []Held{{Key: "maxmemory", Want: "4mb", Reason: HoldLower}},
			effective: rec("maxmemory-policy", "allkeys-lru")},
		{name: "a decrease and a policy change, one confirmed",
			desired:   rec("maxmemory", "4mb", "maxmemory-policy", "volatile-lru"),
			running:   []map[string]string{rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru")},
			confirmed: "maxmemory-policy=volatile-lru",
			held:      []Held{{Key: "maxmemory", Running: "100mb", Want: "4mb", Reason: HoldLower}},
			effective: rec("maxmemory", "100mb", "maxmemory-policy", "volatile-lru")},
		{name: "both confirmed, in one text with spaces and commas",
			desired:   rec("maxmemory", "4mb", "maxmemory-policy", "volatile-lru"),
			running:   []map[string]string{rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lru")},
			confirmed: "maxmemory=4mb, maxmemory-policy=VOLATILE-LRU"},
		{name: "a policy the nodes partly run is held at the first that differs",
			desired:   rec("maxmemory", "100mb", "maxmemory-policy", "volatile-lru"),
			running:   []map[string]string{rec("maxmemory", "100mb", "maxmemory-policy", "volatile-lru"), rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lfu")},
			held:      []Held{{Key: "maxmemory-policy", Running: "allkeys-lfu", Want: "volatile-lru", Reason: HoldPolicy}},
			effective: rec("maxmemory", "100mb", "maxmemory-policy", "allkeys-lfu")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			effective, held := Hold(tc.desired, tc.running, ParseConfirmations(tc.confirmed))
			if !slices.Equal(held, tc.held) {
				t.Errorf("held %+v, want %+v", held, tc.held)
			}
			want := tc.effective
			if want == nil {
				want = tc.desired
			}
			if !maps.Equal(effective, want) {
				t.Errorf("effective %v, want %v", effective, want)
			}
		})
	}
}

func TestHeldConfirmation(t *testing.T) {
	for h, want := range map[Held]string{
		{Key: "maxmemory", Want: "4mb", Reason: HoldLower}:                    "maxmemory=4mb",
		{Key: "maxmemory", Running: "100mb", Reason: HoldRemoved}:             "maxmemory=0",
		{Key: "maxmemory-policy", Running: "allkeys-lru", Reason: HoldPolicy}: "maxmemory-policy=noeviction",
	} {
		if got := h.Confirmation(); got != want {
			t.Errorf("%+v: %q, want %q", h, got, want)
		}
	}
	c := ParseConfirmations("maxmemory=4mb,,junk maxmemory-policy=allkeys-lru", "MAXMEMORY=2mb")
	if !slices.Equal(c["maxmemory"], []string{"4mb", "2mb"}) || !slices.Equal(c["maxmemory-policy"], []string{"allkeys-lru"}) || len(c) != 2 {
		t.Errorf("ParseConfirmations: %v", c)
	}
}
