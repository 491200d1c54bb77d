package fsm

import "testing"

// A pod claims what its node says now, else what the last status recorded: a silent node is not
// taken to be gone.
func TestClaimedID(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  Pod
		want string
	}{
		{"answers", Pod{LastNodeID: "old", Node: &Node{Reachable: true, ID: "new"}}, "new"},
		{"silent", Pod{LastNodeID: "old", Node: &Node{Reachable: false, ID: "new"}}, "old"},
		{"answers without an id", Pod{LastNodeID: "old", Node: &Node{Reachable: true}}, "old"},
		{"not observed", Pod{LastNodeID: "old"}, "old"},
		{"unknown", Pod{}, ""},
	} {
		if got := c.pod.ClaimedID(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
