package controllers

import (
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/fsm"
)

// A move from Valkey 9 to 8 is refused while a Valkey 9 node holds keys with expiring hash
// fields: before anything is replaced (keep 9, or remove the expirations), and mid-roll (go back
// to 9 first); never for an upgrade, nor once no node runs 9.
func TestDowngradeProblem(t *testing.T) {
	node := func(name, v string, volatile int64) fsm.Pod {
		return fsm.Pod{Name: name, Node: &fsm.Node{Reachable: true, Version: v, VolatileItemKeys: volatile}}
	}
	for _, c := range []struct {
		name, target string
		pods         []fsm.Pod
		want         string // a part of the problem; "" for none
	}{
		{"9 to 8, no expiring fields", "8.0.1", []fsm.Pod{node("a", "9.1.2", 0), node("b", "9.1.2", 0)}, ""},
		{"9 to 8 before the roll", "8.0.1", []fsm.Pod{node("a", "9.1.2", 3), node("b", "9.1.2", 0)},
			"Valkey 9.1.2 to 8.0.1: node a holds 3 keys whose hash fields expire (HEXPIRE, HSETEX), which Valkey 8.0.1 cannot load in a full sync nor apply as commands, so no replica on 8.0.1 could copy them; remove the field expirations (HPERSIST)"},
		{"9 to 8 mid-roll", "8.0.1", []fsm.Pod{node("a", "8.0.1", 0), node("b", "9.1.2", 1)}, "node b holds 1 keys whose hash fields expire"},
		{"mid-roll says to go back", "8.0.1", []fsm.Pod{node("a", "8.0.1", 0), node("b", "9.1.2", 1)}, "set the image back to Valkey 9.1.2"},
		{"8 to 9", "9.1.2", []fsm.Pod{node("a", "9.1.2", 5), node("b", "8.0.1", 0)}, ""},
		{"9 to 9", "9.0.0", []fsm.Pod{node("a", "9.1.2", 5)}, ""},
		{"an unreachable node is no evidence", "8.0.1", []fsm.Pod{{Name: "a", Node: &fsm.Node{Version: "9.1.2", VolatileItemKeys: 2}}}, ""},
		{"an unparsable target", "latest", []fsm.Pod{node("a", "9.1.2", 2)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := downgradeProblem(c.target, fsm.Snapshot{Pods: c.pods})
			if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
				t.Errorf("problem %q, want %q", got, c.want)
			}
		})
	}
}
