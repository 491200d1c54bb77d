package valkey

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SlotCount is the number of hash slots in a Valkey cluster; slots are
// numbered 0 to SlotCount-1.
const SlotCount = 16384

// SlotRange is an inclusive range of hash slots, Start <= End. A single slot
// is a range with Start == End, as CLUSTER NODES prints it.
type SlotRange struct {
	Start int
	End   int
}

// Count returns the number of slots in r, or 0 when r is not a valid range.
func (r SlotRange) Count() int {
	if !r.Valid() {
		return 0
	}
	return r.End - r.Start + 1
}

// Valid reports whether r lies inside 0..SlotCount-1 with Start <= End.
func (r SlotRange) Valid() bool {
	return r.Start >= 0 && r.Start <= r.End && r.End < SlotCount
}

// Contains reports whether slot lies in r.
func (r SlotRange) Contains(slot int) bool {
	return slot >= r.Start && slot <= r.End
}

// String prints r as CLUSTER NODES does: "5461" or "0-5460".
func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// SlotRanges is a set of hash slots held as ranges. Functions in this file
// that return a SlotRanges return it normalised: sorted, with no overlapping
// or adjacent ranges, so two equal sets compare equal with slices.Equal.
type SlotRanges []SlotRange

// Count returns the number of distinct slots in rs; overlaps count once.
func (rs SlotRanges) Count() int {
	n := 0
	for _, r := range rs.Normalize() {
		n += r.Count()
	}
	return n
}

// Contains reports whether slot is in any range of rs.
func (rs SlotRanges) Contains(slot int) bool {
	for _, r := range rs {
		if r.Contains(slot) {
			return true
		}
	}
	return false
}

// Normalize returns the valid ranges of rs sorted and merged, so that equal
// sets of slots have equal representations. Invalid ranges are dropped. It
// does not modify rs.
func (rs SlotRanges) Normalize() SlotRanges {
	out := make(SlotRanges, 0, len(rs))
	for _, r := range rs {
		if r.Valid() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b SlotRange) int { return a.Start - b.Start })
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

// String prints rs normalised, ranges separated by commas ("0-99,200"), and
// "" for the empty set.
func (rs SlotRanges) String() string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs.Normalize() {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

// Union returns the normalised union of the given sets.
func Union(sets ...SlotRanges) SlotRanges {
	var all SlotRanges
	for _, s := range sets {
		all = append(all, s...)
	}
	return all.Normalize()
}

// Subtract returns the slots of a that are not in b, normalised.
func Subtract(a, b SlotRanges) SlotRanges {
	a, b = a.Normalize(), b.Normalize()
	var out SlotRanges
	j := 0
	for _, r := range a {
		start := r.Start
		for j < len(b) && b[j].End < start {
			j++
		}
		k := j
		for ; k < len(b) && b[k].Start <= r.End; k++ {
			if b[k].Start > start {
				out = append(out, SlotRange{Start: start, End: b[k].Start - 1})
			}
			start = max(start, b[k].End+1)
		}
		if start <= r.End {
			out = append(out, SlotRange{Start: start, End: r.End})
		}
	}
	return out
}

// Intersect returns the slots that are in both a and b, normalised.
func Intersect(a, b SlotRanges) SlotRanges {
	return Subtract(a, Subtract(a, b))
}

// AllSlots returns the whole slot space, 0-16383.
func AllSlots() SlotRanges {
	return SlotRanges{{Start: 0, End: SlotCount - 1}}
}

// Unassigned returns the slots that none of the given sets covers: what
// still has to be handed out before a cluster can report cluster_state:ok.
func Unassigned(assigned ...SlotRanges) SlotRanges {
	return Subtract(AllSlots(), Union(assigned...))
}

// Covered returns the slots that the primaries in entries claim to serve,
// as one node sees them. Replicas are skipped: they print no slots, and a
// node that printed some for a replica would be describing a stale view.
func Covered(entries []NodeEntry) SlotRanges {
	var sets []SlotRanges
	for _, e := range entries {
		if e.Role == RolePrimary {
			sets = append(sets, e.Slots)
		}
	}
	return Union(sets...)
}

// EvenSlotSpread divides the 16384 slots over n primaries: one contiguous
// range each, in slot order, the first 16384 mod n ranges one slot larger
// than the rest, so sizes differ by at most one. The result depends only on
// n, so every pass of the operator plans the same layout. It returns nil
// when n is not in 1..16384.
func EvenSlotSpread(n int) []SlotRange {
	if n < 1 || n > SlotCount {
		return nil
	}
	size, extra := SlotCount/n, SlotCount%n
	out := make([]SlotRange, n)
	start := 0
	for i := range out {
		width := size
		if i < extra {
			width++
		}
		out[i] = SlotRange{Start: start, End: start + width - 1}
		start += width
	}
	return out
}

// ParseSlotRange parses one slot or range as CLUSTER NODES prints it
// ("5461" or "0-5460").
func ParseSlotRange(s string) (SlotRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	start, err := parseSlot(lo)
	if err != nil {
		return SlotRange{}, fmt.Errorf("slot range %q: %w", s, err)
	}
	end := start
	if isRange {
		if end, err = parseSlot(hi); err != nil {
			return SlotRange{}, fmt.Errorf("slot range %q: %w", s, err)
		}
	}
	if end < start {
		return SlotRange{}, fmt.Errorf("slot range %q: end before start", s)
	}
	return SlotRange{Start: start, End: end}, nil
}

// parseSlot parses one decimal slot number in 0..SlotCount-1. Signs are
// refused: Valkey never prints them, and "-1" would otherwise slip through.
func parseSlot(s string) (int, error) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("invalid slot %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= SlotCount {
		return 0, fmt.Errorf("invalid slot %q", s)
	}
	return n, nil
}
