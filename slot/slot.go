// Package slot is the operator's one model of the Valkey cluster key space: slot ranges, sets of
// slots, their algebra and the even spread of slots over shards. It is pure (no I/O, no client
// libraries), so the planners and package valkey share it instead of each keeping its own copy.
package slot

import (
	"slices"
	"strconv"
	"strings"
)

// Count is the number of hash slots in a Valkey cluster; slots are numbered 0 to Count-1.
const Count = 16384

// Range is an inclusive range of hash slots, Start <= End. A single slot is a range with
// Start == End, as CLUSTER NODES prints it.
type Range struct {
	Start int
	End   int
}

// Count returns the number of slots in r, or 0 when r is not a valid range.
func (r Range) Count() int {
	if !r.Valid() {
		return 0
	}
	return r.End - r.Start + 1
}

// Valid reports whether r lies inside 0..Count-1 with Start <= End.
func (r Range) Valid() bool {
	return r.Start >= 0 && r.Start <= r.End && r.End < Count
}

// Contains reports whether s lies in r.
func (r Range) Contains(s int) bool {
	return s >= r.Start && s <= r.End
}

// String prints r as CLUSTER NODES does: "5461" or "0-5460".
func (r Range) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// Set is a set of hash slots held as ranges. Functions of this package that return a Set return
// it normalised: sorted, with no overlapping or adjacent ranges, so two equal sets compare equal
// with slices.Equal.
type Set []Range

// Count returns the number of distinct slots in s; overlaps count once.
func (s Set) Count() int {
	n := 0
	for _, r := range s.Normalize() {
		n += r.Count()
	}
	return n
}

// Contains reports whether slot is in any range of s.
func (s Set) Contains(slot int) bool {
	for _, r := range s {
		if r.Contains(slot) {
			return true
		}
	}
	return false
}

// Normalize returns the valid ranges of s sorted and merged, so that equal sets of slots have
// equal representations. Invalid ranges are dropped: a view that printed slot 16384 describes
// nothing a client can reach. It does not modify s.
func (s Set) Normalize() Set {
	out := make(Set, 0, len(s))
	for _, r := range s {
		if r.Valid() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return a.Start - b.Start })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r.Start <= merged[n-1].End+1 {
			merged[n-1].End = max(merged[n-1].End, r.End)
			continue
		}
		merged = append(merged, r)
	}
	if len(merged) == 0 {
		return nil
	}
	return merged
}

// String prints s normalised, ranges separated by commas ("0-99,200"), and "" for the empty set.
func (s Set) String() string {
	parts := make([]string, 0, len(s))
	for _, r := range s.Normalize() {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

// Union returns the normalised union of the given sets.
func Union(sets ...Set) Set {
	var all Set
	for _, s := range sets {
		all = append(all, s...)
	}
	return all.Normalize()
}

// Subtract returns the slots of a that are not in b, normalised.
func Subtract(a, b Set) Set {
	a, b = a.Normalize(), b.Normalize()
	var out Set
	j := 0
	for _, r := range a {
		start := r.Start
		for j < len(b) && b[j].End < start {
			j++
		}
		k := j
		for ; k < len(b) && b[k].Start <= r.End; k++ {
			if b[k].Start > start {
				out = append(out, Range{Start: start, End: b[k].Start - 1})
			}
			start = max(start, b[k].End+1)
		}
		if start <= r.End {
			out = append(out, Range{Start: start, End: r.End})
		}
	}
	return out
}

// Intersect returns the slots that are in both a and b, normalised.
func Intersect(a, b Set) Set {
	return Subtract(a, Subtract(a, b))
}

// All returns the whole slot space, 0-16383.
func All() Set {
	return Set{{Start: 0, End: Count - 1}}
}

// Unassigned returns the slots that none of the given sets covers: what still has to be handed
// out before a cluster can report cluster_state:ok.
func Unassigned(assigned ...Set) Set {
	return Subtract(All(), Union(assigned...))
}

// EvenSpread divides the 16384 slots over n primaries: one contiguous range each, in slot order,
// the first 16384 mod n ranges one slot larger than the rest, so sizes differ by at most one. The
// result depends only on n, so every pass of the operator (and an operator restarted mid-way)
// plans the same layout. It returns nil when n is not in 1..16384.
func EvenSpread(n int) []Range {
	if n < 1 || n > Count {
		return nil
	}
	size, extra := Count/n, Count%n
	out := make([]Range, n)
	start := 0
	for i := range out {
		width := size
		if i < extra {
			width++
		}
		out[i] = Range{Start: start, End: start + width - 1}
		start += width
	}
	return out
}
