package plan

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"
)

// withSettings gives the spec the settings desired, every node the record recorded, and every
// node's CONFIG GET observed.
func withSettings(desired, recorded, observed map[string]string) opt {
	return func(s *fsm.Snapshot) {
		s.Settings = desired
		for i := range s.Pods {
			s.Pods[i].Settings = recorded
			s.Pods[i].Node.Config = observed
		}
	}
}

// withConfig overrides one node's CONFIG GET.
func withConfig(name string, observed map[string]string) opt {
	return withPod(name, func(p *fsm.Pod) { p.Node.Config = observed })
}

func TestPlanSettings(t *testing.T) {
	old := map[string]string{"port": "6379", "maxmemory": "100mb", "maxmemory-policy": "noeviction"}
	newer := map[string]string{"port": "6379", "maxmemory": "200mb", "maxmemory-policy": "allkeys-lru"}
	runs := map[string]string{"maxmemory": "104857600", "maxmemory-policy": "noeviction", "hz": "10"}
	runsNew := map[string]string{"maxmemory": "209715200", "maxmemory-policy": "allkeys-lru", "hz": "10"}
	change := []liveconf.Change{{Key: "maxmemory", Want: "200mb", Have: "104857600"}, {Key: "maxmemory-policy", Want: "allkeys-lru", Have: "noeviction"}}
	all := func(a func(pod string) Action) []Action {
		var out []Action
		for _, p := range []string{"p0-0", "p0-1", "p1-0", "p1-1", "p2-0", "p2-1"} {
			out = append(out, a(p))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		state fsm.State
		opts  []opt
		want  []Action
	}{
		{name: "in agreement: nothing", state: fsm.Active, opts: []opt{formed, withSettings(old, old, runs)}},
		{name: "a spec change: every node in one pass", state: fsm.Active, opts: []opt{formed, withSettings(newer, old, runs)},
			want: all(func(p string) Action { return SetConfig{Pod: p, Set: change} })},
		{name: "while a roll goes on (Upgrading)", state: fsm.Upgrading, opts: []opt{formed, withSettings(newer, old, runs)},
			want: all(func(p string) Action { return SetConfig{Pod: p, Set: change} })},
		{name: "drift on one node: put back, named as drift", state: fsm.Active,
			opts: []opt{formed, withSettings(old, old, runs), withConfig("p1-1", map[string]string{"maxmemory": "5", "maxmemory-policy": "noeviction"})},
			want: []Action{SetConfig{Pod: "p1-1", Set: []liveconf.Change{{Key: "maxmemory", Want: "100mb", Have: "5"}}, Drift: []string{"maxmemory"}}}},
		{name: "applied, record behind: record only", state: fsm.Active, opts: []opt{formed, withSettings(newer, old, runsNew)},
			want: all(func(p string) Action { return SetConfig{Pod: p} })},
		{name: "a setting removed from the spec goes back to Valkey's default", state: fsm.Active,
			opts: []opt{formed, withSettings(map[string]string{"port": "6379"}, map[string]string{"port": "6379", "hz": "50"}, map[string]string{"hz": "50"})},
			want: all(func(p string) Action {
				return SetConfig{Pod: p, Set: []liveconf.Change{{Key: "hz", Want: "10", Have: "50"}}}
			})},
		{name: "unreachable, unread or not Active nodes are left for later", state: fsm.Active,
			opts: []opt{formed, withSettings(newer, old, runs), withCut("p0-0"), withConfig("p0-1", nil), withLifecycle("p1-0", v1.LifecycleJoining),
				withLifecycle("p1-1", v1.LifecycleLeaving), withDeleting("p2-0", true)},
			want: []Action{SetConfig{Pod: "p2-1", Set: change}}},
		{name: "not formed: nothing", state: fsm.Forming, opts: []opt{formed, withSettings(newer, old, runs)}},
		{name: "spec unresolved: nothing", state: fsm.Active, opts: []opt{formed, withSettings(nil, old, runs)}},
		{name: "a restart setting alone is the upgrade planner's", state: fsm.Active,
			opts: []opt{formed, withSettings(map[string]string{"port": "6379", "maxmemory": "100mb", "maxmemory-policy": "noeviction", "appendonly": "yes"}, old, runs)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot(tc.state, 3, 1, tc.opts...)
			got := run(settings, tc.state, s)
			if !reflect.DeepEqual(got.Actions, tc.want) {
				t.Errorf("actions:\n got %v\nwant %v", got.Actions, tc.want)
			}
			if got.Waiting != "" || got.Blocked != "" || got.Disruptive() != nil {
				t.Errorf("waiting %q blocked %q disruptive %v: the settings planner never holds the pass", got.Waiting, got.Blocked, got.Disruptive())
			}
			// Deciding again once the settings run and are recorded plans nothing.
			after := newSnapshot(tc.state, 3, 1, tc.opts...)
			for i := range after.Pods {
				p := &after.Pods[i]
				if p.Node != nil && p.Node.Config != nil && after.Settings != nil {
					p.Settings = after.Settings
					cfg := map[string]string{}
					for k, v := range liveconf.Want(after.Settings, nil) {
						cfg[k] = liveconf.Normalize(k, v)
					}
					p.Node.Config = cfg
				}
			}
			if again := run(settings, tc.state, after); len(again.Actions) != 0 {
				t.Errorf("after the settings applied: %v", again.Actions)
			}
		})
	}
}

// In the chain, the settings go in the same pass as the roll's step that follows them.
func TestSettingsBeforeTheRoll(t *testing.T) {
	s := newSnapshot(fsm.Active, 3, 1, formed, withSettings(
		map[string]string{"maxmemory": "1gb"}, map[string]string{"maxmemory": "100mb"}, map[string]string{"maxmemory": "104857600"}))
	s.Settings = map[string]string{"maxmemory": "1gb"}
	p := Default().Run(Input{State: fsm.Active, Snapshot: s})
	n := 0
	for _, a := range p.Actions {
		if _, ok := a.(SetConfig); ok {
			n++
		}
	}
	if n != 6 || p.Err != nil {
		t.Errorf("plan %v (err %v): want 6 SetConfig", p.Actions, p.Err)
	}
}
