package slot

import (
	"slices"
	"testing"
)

func TestEvenSpread(t *testing.T) {
	tests := []struct {
		n    int
		want []Range
	}{
		{n: 0, want: nil},
		{n: -1, want: nil},
		{n: Count + 1, want: nil},
		{n: 1, want: []Range{{0, 16383}}},
		{n: 2, want: []Range{{0, 8191}, {8192, 16383}}},
		// valkey-cli --cluster create gives the extra slot to the middle range;
		// this spread gives it to the first, the rule being "first n mod k".
		{n: 3, want: []Range{{0, 5461}, {5462, 10922}, {10923, 16383}}},
		{n: 4, want: []Range{{0, 4095}, {4096, 8191}, {8192, 12287}, {12288, 16383}}},
		{n: 5, want: []Range{{0, 3276}, {3277, 6553}, {6554, 9830}, {9831, 13107}, {13108, 16383}}},
	}
	for _, tt := range tests {
		if got := EvenSpread(tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("EvenSpread(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// TestEvenSpreadProperties checks, for every primary count a cluster
// could plausibly have and the extremes, that the spread covers every slot
// exactly once with contiguous ranges whose sizes differ by at most one.
func TestEvenSpreadProperties(t *testing.T) {
	for _, n := range append(rangeInts(1, 200), 1000, 8191, 16383, Count) {
		got := EvenSpread(n)
		if len(got) != n {
			t.Fatalf("n=%d: %d ranges", n, len(got))
		}
		next, lo, hi := 0, Count, 0
		for _, r := range got {
			if r.Start != next || !r.Valid() {
				t.Fatalf("n=%d: range %v not contiguous after %d", n, r, next)
			}
			next = r.End + 1
			lo, hi = min(lo, r.Count()), max(hi, r.Count())
		}
		if next != Count || hi-lo > 1 {
			t.Fatalf("n=%d: ends at %d, sizes %d..%d", n, next, lo, hi)
		}
		if !slices.Equal(got, EvenSpread(n)) {
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

func TestSetNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   Set
		want Set
	}{
		{"empty", nil, nil},
		{"one", Set{{5, 9}}, Set{{5, 9}}},
		{"sorts", Set{{10, 12}, {0, 1}}, Set{{0, 1}, {10, 12}}},
		{"merges overlap", Set{{0, 10}, {5, 20}}, Set{{0, 20}}},
		{"merges adjacent", Set{{0, 10}, {11, 20}}, Set{{0, 20}}},
		{"keeps gap", Set{{0, 10}, {12, 20}}, Set{{0, 10}, {12, 20}}},
		{"contained", Set{{0, 100}, {5, 6}, {7, 7}}, Set{{0, 100}}},
		{"drops invalid", Set{{5, 4}, {-1, 3}, {0, Count}, {1, 1}}, Set{{1, 1}}},
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
	a := Set{{0, 99}, {200, 299}}
	b := Set{{50, 249}}
	tests := []struct {
		name string
		got  Set
		want Set
	}{
		{"union", Union(a, b), Set{{0, 299}}},
		{"union of nothing", Union(), nil},
		{"subtract middle", Subtract(a, b), Set{{0, 49}, {250, 299}}},
		{"subtract reversed", Subtract(b, a), Set{{100, 199}}},
		{"subtract all", Subtract(a, All()), nil},
		{"subtract nothing", Subtract(a, nil), a},
		{"subtract splits one range many times",
			Subtract(Set{{0, 20}}, Set{{2, 3}, {5, 5}, {20, 30}}),
			Set{{0, 1}, {4, 4}, {6, 19}}},
		{"subtract range spanning two", Subtract(Set{{0, 10}, {20, 30}}, Set{{5, 25}}),
			Set{{0, 4}, {26, 30}}},
		{"intersect", Intersect(a, b), Set{{50, 99}, {200, 249}}},
		{"intersect disjoint", Intersect(Set{{0, 1}}, Set{{2, 3}}), nil},
		{"unassigned none", Unassigned(), All()},
		{"unassigned gaps", Unassigned(Set{{0, 5460}}, Set{{10923, 16383}}), Set{{5461, 10922}}},
		{"unassigned full", Unassigned(Set(EvenSpread(7))), nil},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestSetCountContainsString(t *testing.T) {
	rs := Set{{0, 9}, {5, 14}, {100, 100}}
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
	if got := All().Count(); got != Count {
		t.Errorf("All().Count() = %d", got)
	}
}
