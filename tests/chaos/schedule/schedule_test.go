package schedule

import (
	"reflect"
	"testing"
	"time"
)

// clusters is the chaos suite's trio.
var clusters = []Cluster{
	{Name: "acl", Shards: 3, Replicas: 1, Version: Valkey8, ACL: true},
	{Name: "nine", Shards: 2, Replicas: 2, Version: Valkey9},
	{Name: "tls", Shards: 3, Replicas: 1, Version: Valkey8, TLS: true},
}

// TestSameSeedSameSchedule: a replayed seed reproduces the schedule exactly, and another seed
// gives another one.
func TestSameSeedSameSchedule(t *testing.T) {
	a := Generate(Options{Seed: 42, Duration: 10 * time.Minute, Clusters: clusters})
	b := Generate(Options{Seed: 42, Duration: 10 * time.Minute, Clusters: clusters})
	if !reflect.DeepEqual(a, b) || a.String() != b.String() {
		t.Fatalf("seed 42 gave two schedules:\n%s\n%s", a, b)
	}
	c := Generate(Options{Seed: 43, Duration: 10 * time.Minute, Clusters: clusters})
	if reflect.DeepEqual(a.Events, c.Events) {
		t.Fatalf("seeds 42 and 43 gave the same schedule:\n%s", a)
	}
	if len(a.Events) == 0 {
		t.Fatal("no events in 10 minutes")
	}
	t.Log(a)
}

// TestGenerateDoesNotMutateInput: the caller's clusters are the start, not the final specs.
func TestGenerateDoesNotMutateInput(t *testing.T) {
	in := append([]Cluster(nil), clusters...)
	Generate(Options{Seed: 7, Duration: 20 * time.Minute, Clusters: in})
	if !reflect.DeepEqual(in, clusters) {
		t.Fatalf("Generate changed its input: %v", in)
	}
}

// TestRules checks the package's rules on many seeds: pairs on two shards, bounds on shards and
// replicas, one upgrade at most, DayGap between changes of a cluster, cut length, and a 20-minute
// run holding at least 50 faults (the long run's promise).
func TestRules(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		s := Generate(Options{Seed: seed, Duration: 20 * time.Minute, Clusters: clusters})
		if s.Faults() < 50 {
			t.Errorf("seed %d: %d faults in 20 minutes, want 50 or more", seed, s.Faults())
		}
		shape := map[string]Cluster{}
		for _, c := range clusters {
			shape[c.Name] = c
		}
		lastDay := map[string]time.Duration{}
		upgrades := map[string]int{}
		pairs := map[int][]Event{}
		for i, e := range s.Events {
			if i > 0 && e.At < s.Events[i-1].At {
				t.Fatalf("seed %d: events out of order at %d", seed, i)
			}
			if e.At >= s.Duration+10*time.Second {
				t.Errorf("seed %d: %s after the end", seed, e)
			}
			c := shape[e.Cluster]
			switch e.Kind {
			case Kill, DeletePod, StopNode, CutNetwork:
				if e.Shard < 0 || e.Shard >= c.Shards {
					t.Errorf("seed %d: %s targets shard %d of %d", seed, e, e.Shard, c.Shards)
				}
				if e.Kind == CutNetwork && e.For != CutFor {
					t.Errorf("seed %d: %s: a cut lasts %s", seed, e, CutFor)
				}
				if e.Pair != 0 {
					pairs[e.Pair] = append(pairs[e.Pair], e)
				}
			case KillOperator, ZoneLoss:
			default:
				if prev, ok := lastDay[e.Cluster]; ok && e.At-prev < DayGap {
					t.Errorf("seed %d: %s only %s after the previous change of %s", seed, e, e.At-prev, e.Cluster)
				}
				lastDay[e.Cluster] = e.At
				switch e.Kind {
				case Upgrade:
					if upgrades[e.Cluster]++; c.Version != Valkey8 {
						t.Errorf("seed %d: %s of a cluster on %s", seed, e, c.Version)
					}
					c.Version = Valkey9
				case Shards:
					c.Shards = e.Value
				case Replicas:
					c.Replicas = e.Value
				case RotatePassword:
					if !c.ACL {
						t.Errorf("seed %d: %s of a cluster without ACL", seed, e)
					}
				case RotateCert:
					if !c.TLS {
						t.Errorf("seed %d: %s of a cluster without TLS", seed, e)
					}
				}
				if c.Shards < MinShards || c.Shards > MaxShards || c.Replicas < MinReplicas || c.Replicas > MaxReplicas {
					t.Errorf("seed %d: %s leaves %s out of bounds", seed, e, c)
				}
				shape[e.Cluster] = c
			}
		}
		for n, p := range pairs {
			if len(p) != 2 || p[0].At != p[1].At || (p[0].Cluster == p[1].Cluster && p[0].Shard == p[1].Shard) {
				t.Errorf("seed %d: pair %d is not two faults at once on two shards: %v", seed, n, p)
			}
		}
		for _, c := range s.Final {
			if got := shape[c.Name]; got.Shards != c.Shards || got.Replicas != c.Replicas || got.Version != c.Version {
				t.Errorf("seed %d: final %s, the events lead to %s", seed, c, got)
			}
		}
	}
}

// TestZoneLosses: one zone loss per ten minutes of schedule (none in the bounded run), each
// 30–60 s, after the other events.
func TestZoneLosses(t *testing.T) {
	clusters := []Cluster{{Name: "acl", Shards: 3, Replicas: 1, Version: Valkey8}}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{150 * time.Second, 0}, {15 * time.Minute, 1}, {30 * time.Minute, 3}} {
		s := Generate(Options{Seed: 4242, Duration: c.d, Clusters: clusters})
		var zones, others []Event
		for _, e := range s.Events {
			if e.Kind == ZoneLoss {
				zones = append(zones, e)
			} else {
				others = append(others, e)
			}
		}
		if len(zones) != c.want {
			t.Errorf("%s: %d zone losses, want %d", c.d, len(zones), c.want)
		}
		for _, e := range zones {
			if e.For < 30*time.Second || e.For > time.Minute || e.At >= c.d {
				t.Errorf("%s: %s", c.d, e)
			}
		}
		if len(others) == 0 {
			t.Errorf("%s: no other event", c.d)
		}
	}
}
