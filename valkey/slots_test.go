package valkey

import (
	"slices"
	"testing"
)

func TestEvenSlotSpread(t *testing.T) {
	tests := []struct {
		n    int
		want []SlotRange
	}{
		{n: 0, want: nil},
		{n: -1, want: nil},
		{n: SlotCount + 1, want: nil},
		{n: 1, want: []SlotRange{{0, 16383}}},
		{n: 2, want: []SlotRange{{0, 8191}, {8192, 16383}}},
		// valkey-cli --cluster create gives the extra slot to the middle range;
		// this spread gives it to the first, the rule being "first n mod k".
		{n: 3, want: []SlotRange{{0, 5461}, {5462, 10922}, {10923, 16383}}},
		{n: 4, want: []SlotRange{{0, 4095}, {4096, 8191}, {8192, 12287}, {12288, 16383}}},
		{n: 5, want: []SlotRange{{0, 3276}, {3277, 6553}, {6554, 9830}, {9831, 13107}, {13108, 16383}}},
	}
	for _, tt := range tests {
		if got := EvenSlotSpread(tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("EvenSlotSpread(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// TestEvenSlotSpreadProperties checks, for every primary count a cluster
// could plausibly have and the extremes, that the spread covers every slot
// exactly once with contiguous ranges whose sizes differ by at most one.
func TestEvenSlotSpreadProperties(t *testing.T) {
	for _, n := range append(rangeInts(1, 200), 1000, 8191, 16383, SlotCount) {
		got := EvenSlotSpread(n)
		if len(got) != n {
			t.Fatalf("n=%d: %d ranges", n, len(got))
		}
		next, lo, hi := 0, SlotCount, 0
		for _, r := range got {
			if r.Start != next || !r.Valid() {
				t.Fatalf("n=%d: range %v not contiguous after %d", n, r, next)
			}
			next = r.End + 1
			lo, hi = min(lo, r.Count()), max(hi, r.Count())
		}
		if next != SlotCount || hi-lo > 1 {
			t.Fatalf("n=%d: ends at %d, sizes %d..%d", n, next, lo, hi)
		}
		if !slices.Equal(got, EvenSlotSpread(n)) {
			t.Fatalf("n=%d: not deterministic", n)
		}
	}
}

func rangeInts(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestSlotRangesNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   SlotRanges
		want SlotRanges
	}{
		{"empty", nil, nil},
		{"one", SlotRanges{{5, 9}}, SlotRanges{{5, 9}}},
		{"sorts", SlotRanges{{10, 12}, {0, 1}}, SlotRanges{{0, 1}, {10, 12}}},
		{"merges overlap", SlotRanges{{0, 10}, {5, 20}}, SlotRanges{{0, 20}}},
		{"merges adjacent", SlotRanges{{0, 10}, {11, 20}}, SlotRanges{{0, 20}}},
		{"keeps gap", SlotRanges{{0, 10}, {12, 20}}, SlotRanges{{0, 10}, {12, 20}}},
		{"contained", SlotRanges{{0, 100}, {5, 6}, {7, 7}}, SlotRanges{{0, 100}}},
		{"drops invalid", SlotRanges{{5, 4}, {-1, 3}, {0, SlotCount}, {1, 1}}, SlotRanges{{1, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := tt.in.Normalize(); !slices.Equal(got, tt.want) {
				t.Errorf("Normalize(%v) = %v, want %v", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("Normalize modified its input")
			}
		})
	}
}

func TestSlotSetOperations(t *testing.T) {
	a := SlotRanges{{0, 99}, {200, 299}}
	b := SlotRanges{{50, 249}}
	tests := []struct {
		name string
		got  SlotRanges
		want SlotRanges
	}{
		{"union", Union(a, b), SlotRanges{{0, 299}}},
		{"union of nothing", Union(), nil},
		{"subtract middle", Subtract(a, b), SlotRanges{{0, 49}, {250, 299}}},
		{"subtract reversed", Subtract(b, a), SlotRanges{{100, 199}}},
		{"subtract all", Subtract(a, AllSlots()), nil},
		{"subtract nothing", Subtract(a, nil), a},
		{"subtract splits one range many times",
			Subtract(SlotRanges{{0, 20}}, SlotRanges{{2, 3}, {5, 5}, {20, 30}}),
			SlotRanges{{0, 1}, {4, 4}, {6, 19}}},
		{"subtract range spanning two", Subtract(SlotRanges{{0, 10}, {20, 30}}, SlotRanges{{5, 25}}),
			SlotRanges{{0, 4}, {26, 30}}},
		{"intersect", Intersect(a, b), SlotRanges{{50, 99}, {200, 249}}},
		{"intersect disjoint", Intersect(SlotRanges{{0, 1}}, SlotRanges{{2, 3}}), nil},
		{"unassigned none", Unassigned(), AllSlots()},
		{"unassigned gaps", Unassigned(SlotRanges{{0, 5460}}, SlotRanges{{10923, 16383}}), SlotRanges{{5461, 10922}}},
		{"unassigned full", Unassigned(SlotRanges(EvenSlotSpread(7))), nil},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestSlotRangesCountContainsString(t *testing.T) {
	rs := SlotRanges{{0, 9}, {5, 14}, {100, 100}}
	if got := rs.Count(); got != 16 {
		t.Errorf("Count = %d, want 16 (overlap counted once)", got)
	}
	for slot, want := range map[int]bool{0: true, 14: true, 15: false, 100: true, 16383: false} {
		if got := rs.Contains(slot); got != want {
			t.Errorf("Contains(%d) = %v, want %v", slot, got, want)
		}
	}
	if got := rs.String(); got != "0-14,100" {
		t.Errorf("String = %q", got)
	}
	if got := AllSlots().Count(); got != SlotCount {
		t.Errorf("AllSlots().Count() = %d", got)
	}
}

func TestParseSlotRange(t *testing.T) {
	tests := []struct {
		in      string
		want    SlotRange
		wantErr bool
	}{
		{in: "0-5460", want: SlotRange{0, 5460}},
		{in: "5461", want: SlotRange{5461, 5461}},
		{in: "16383", want: SlotRange{16383, 16383}},
		{in: "16384", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "10-5", wantErr: true},
		{in: "1-", wantErr: true},
		{in: "", wantErr: true},
		{in: "a-b", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseSlotRange(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSlotRange(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCovered(t *testing.T) {
	entries := []NodeEntry{
		{Role: RolePrimary, Slots: SlotRanges{{0, 99}}},
		{Role: RoleReplica, Slots: SlotRanges{{100, 199}}},
		{Role: RolePrimary, Slots: SlotRanges{{200, 299}}},
		{Role: RoleUnknown, Slots: SlotRanges{{300, 399}}},
	}
	if got, want := Covered(entries), (SlotRanges{{0, 99}, {200, 299}}); !slices.Equal(got, want) {
		t.Errorf("Covered = %v, want %v", got, want)
	}
}
