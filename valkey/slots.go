package valkey

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gomomento/valkey-operator/slot"
)

// SlotCount is the number of hash slots in a Valkey cluster (slot.Count).
const SlotCount = slot.Count

// SlotRange is an inclusive range of hash slots: package slot's model, named here so that the
// parsing code reads in Valkey's words. There is one slot model; this is not a second one.
type SlotRange = slot.Range

// SlotRanges is a set of hash slots held as ranges (slot.Set).
type SlotRanges = slot.Set

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
	return slot.Union(sets...)
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
