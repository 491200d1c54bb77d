package plan

// The settings planner applies the settings Valkey takes at run time (package liveconf) to the
// nodes that run other values, instead of a rolling replacement: the spec hash leaves them out,
// so a change of them alone outdates no node. Its rules, in order:
//
//  1. Only a formed cluster (Active or Upgrading) whose spec resolved (Snapshot.Settings).
//  2. Only live, Active nodes that answered with their settings (fsm.Node.Config). A node that
//     does not answer, or whose settings could not be read, is left for a later pass: unknown
//     is not absent. A Joining node was created with the desired settings; a Leaving one goes.
//  3. A node's wanted values are the desired spec's live settings, and Valkey's default for a
//     live setting its record holds that the spec no longer does (liveconf.Want). Each wanted
//     value the node does not run (compared as Valkey does, liveconf.Equal) is set: a change of
//     the spec when the record says otherwise, drift when the record already says that value
//     (the node was changed by hand).
//  4. A node that runs every wanted value while its record says something else has its record
//     brought up to date (SetConfig without settings).
//  5. A change of maxmemory waits on a node whose memory grows in place until its pod has grown
//     (HoldsMaxmemory, the resize planner); the node's other settings do not.
//  6. Every such node in one pass: CONFIG SET is harmless and idempotent. Nothing is awaited, so
//     the concerns after it (rolls, cleanup) go on in the same pass.

import (
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

var settings = Planner{Name: "settings", Plan: planSettings}

func planSettings(in Input) Step {
	s := in.Snapshot
	if (in.State != fsm.Active && in.State != fsm.Upgrading) || s.Settings == nil {
		return Step{}
	}
	var st Step
	for _, p := range s.LivePods() {
		n := p.Node
		if p.Lifecycle != string(v1.LifecycleActive) || n == nil || !n.Reachable || n.Config == nil {
			continue
		}
		set := liveconf.Diff(s.Settings, p.Settings, n.Config)
		if HoldsMaxmemory(s, p) {
			// Growing in place: the pod's memory first (the resize planner), maxmemory after.
			kept := set[:0:0]
			for _, c := range set {
				if c.Key != "maxmemory" {
					kept = append(kept, c)
				}
			}
			if len(kept) < len(set) && len(kept) == 0 {
				continue
			}
			set = kept
		}
		if len(set) == 0 {
			if !liveconf.SameLive(p.Settings, s.Settings) && observedAll(s.Settings, p.Settings, n.Config) {
				st.Actions = append(st.Actions, SetConfig{Pod: p.Name})
			}
			continue
		}
		recorded := liveconf.Want(p.Settings, nil)
		a := SetConfig{Pod: p.Name, Set: set}
		for _, c := range set {
			if r, ok := recorded[c.Key]; ok && liveconf.Equal(c.Key, r, c.Want) {
				a.Drift = append(a.Drift, c.Key)
			}
		}
		st.Actions = append(st.Actions, a)
	}
	return st
}

// observedAll reports whether the node's settings include every value it should run: a record
// is only brought up to date from a node whose every wanted setting is known.
func observedAll(desired, recorded, observed map[string]string) bool {
	for k := range liveconf.Want(desired, recorded) {
		if _, ok := observed[k]; !ok {
			return false
		}
	}
	return true
}
