package valkey

import (
	"slices"
	"testing"
)

func TestParseSlotRange(t *testing.T) {
	tests := []struct {
		in      string
		want    SlotRange
		wantErr bool
	}{
		{in: "0-5460", want: SlotRange{Start: 0, End: 5460}},
		{in: "5461", want: SlotRange{Start: 5461, End: 5461}},
		{in: "16383", want: SlotRange{Start: 16383, End: 16383}},
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
		{Role: RolePrimary, Slots: SlotRanges{{Start: 0, End: 99}}},
		{Role: RoleReplica, Slots: SlotRanges{{Start: 100, End: 199}}},
		{Role: RolePrimary, Slots: SlotRanges{{Start: 200, End: 299}}},
		{Role: RoleUnknown, Slots: SlotRanges{{Start: 300, End: 399}}},
	}
	if got, want := Covered(entries), (SlotRanges{{Start: 0, End: 99}, {Start: 200, End: 299}}); !slices.Equal(got, want) {
		t.Errorf("Covered = %v, want %v", got, want)
	}
}
