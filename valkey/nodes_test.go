package valkey

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	idA = "28ec60e0dc4dfa1815da5d61253cd74de7bee262"
	idB = "9a974e183685cd79100e8c97ac6b596908ea47c3"
	idC = "34d0ea65b9e9fdc89321c36c180fc3a75b40b9b6"
	idD = "2a5d6691cd59301f50b91fa780e5d16809591c55"
	idH = "eea92cdb2ded00fb341a6eb486e621df40ef05aa"
)

// readFixture returns a file captured from valkey-server 8.0.1 (see
// testdata/README.md for how each was produced).
func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseClusterNodesFixtures checks each captured CLUSTER NODES output
// field by field for the entries that show something new.
func TestParseClusterNodesFixtures(t *testing.T) {
	tests := []struct {
		file string
		want map[string]NodeEntry // by node id; entries not listed are only counted
		n    int
	}{
		{
			file: "cluster_nodes_fresh.txt",
			n:    1,
			want: map[string]NodeEntry{idA: {
				ID: idA, IP: "", Port: 27001, BusPort: 37001,
				Flags: []string{"myself", "primary"}, Myself: true, Role: RolePrimary, Connected: true,
			}},
		},
		{
			file: "cluster_nodes_formed.txt",
			n:    4,
			want: map[string]NodeEntry{
				idD: {
					ID: idD, IP: "127.0.0.1", Port: 27004, BusPort: 37004,
					Flags: []string{"replica"}, Role: RoleReplica, PrimaryID: idA,
					PongRecv: 1796047940170, ConfigEpoch: 1, Connected: true,
				},
				idA: {
					ID: idA, IP: "127.0.0.1", Port: 27001, BusPort: 37001,
					Flags: []string{"myself", "primary"}, Myself: true, Role: RolePrimary,
					ConfigEpoch: 1, Connected: true, Slots: SlotRanges{{Start: 0, End: 5460}},
				},
				idC: {
					ID: idC, IP: "127.0.0.1", Port: 27003, BusPort: 37003,
					Flags: []string{"primary"}, Role: RolePrimary,
					PongRecv: 1796047940069, ConfigEpoch: 3, Connected: true, Slots: SlotRanges{{Start: 10923, End: 16383}},
				},
			},
		},
		{
			file: "cluster_nodes_handshake_migrating.txt",
			n:    5,
			want: map[string]NodeEntry{
				idA: {
					ID: idA, IP: "127.0.0.1", Port: 27001, BusPort: 37001, Hostname: "node-a.example",
					Flags: []string{"myself", "primary"}, Myself: true, Role: RolePrimary,
					ConfigEpoch: 1, Connected: true, Slots: SlotRanges{{Start: 0, End: 5460}},
					Migrating: []SlotMigration{{100, idB}, {101, idB}},
				},
				idH: {
					ID: idH, IP: "127.0.0.1", Port: 27999, BusPort: 37999,
					Flags: []string{"handshake"}, Handshake: true, Role: RoleUnknown,
				},
			},
		},
		{
			file: "cluster_nodes_importing.txt",
			n:    4,
			want: map[string]NodeEntry{idB: {
				ID: idB, IP: "127.0.0.1", Port: 27002, BusPort: 37002,
				Flags: []string{"myself", "primary"}, Myself: true, Role: RolePrimary,
				Connected: true, Slots: SlotRanges{{Start: 5461, End: 10922}},
				Importing: []SlotMigration{{100, idA}},
			}},
		},
		{
			file: "cluster_nodes_disconnected.txt",
			n:    4,
			want: map[string]NodeEntry{
				idC: {
					ID: idC, IP: "127.0.0.1", Port: 27003, BusPort: 37003,
					Flags: []string{"primary"}, Role: RolePrimary,
					PingSent: 1796047944201, PongRecv: 1796047943194, ConfigEpoch: 3,
					Connected: false, Slots: SlotRanges{{Start: 10923, End: 16383}},
				},
				idD: {
					ID: idD, IP: "127.0.0.1", Port: 27004, BusPort: 37004,
					Flags: []string{"replica", "nofailover"}, Role: RoleReplica, NoFailover: true, PrimaryID: idA,
					PongRecv: 1796047944100, ConfigEpoch: 1, Connected: true,
				},
			},
		},
		{
			file: "cluster_nodes_fail.txt",
			n:    4,
			want: map[string]NodeEntry{idC: {
				ID: idC, IP: "127.0.0.1", Port: 27003, BusPort: 37003,
				Flags: []string{"primary", "fail"}, Role: RolePrimary, Fail: true,
				PingSent: 1796047944201, PongRecv: 1796047943194, ConfigEpoch: 3,
				Slots: SlotRanges{{Start: 10923, End: 16383}},
			}},
		},
		{
			file: "nodes_conf.txt",
			n:    4,
			want: map[string]NodeEntry{idD: {
				ID: idD, IP: "127.0.0.1", Port: 27004, BusPort: 37004,
				ShardID: "02a316ecc3e73c1b9e2da3555e4c641d80d5c75b",
				Flags:   []string{"replica", "nofailover"}, Role: RoleReplica, NoFailover: true, PrimaryID: idA,
				PongRecv: 1796047951243, ConfigEpoch: 1, Connected: true,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseClusterNodes(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d entries, want %d", len(got), tt.n)
			}
			for id, want := range tt.want {
				i := slices.IndexFunc(got, func(e NodeEntry) bool { return e.ID == id })
				if i < 0 {
					t.Fatalf("no entry for %s", id)
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("entry %s:\n got %+v\nwant %+v", id, got[i], want)
				}
			}
		})
	}
}

func TestParseClusterNodesSynthetic(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		check func(t *testing.T, e NodeEntry)
	}{
		{
			name: "pfail with noaddr",
			line: idC + " :0@0 master,fail?,noaddr - 1700000000000 1699999999000 3 disconnected 10923-16383",
			check: func(t *testing.T, e NodeEntry) {
				if !e.PFail || e.Fail || !e.NoAddr || e.IP != "" || e.Port != 0 || e.Connected {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "valkey words primary and replica are accepted too",
			line: idD + " 10.0.0.4:6379@16379 replica " + idA + " 0 1 1 connected",
			check: func(t *testing.T, e NodeEntry) {
				if e.Role != RoleReplica || e.PrimaryID != idA || !e.HasFlag(FlagReplica) {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "noflags is dropped, role unknown",
			line: idH + " 10.0.0.9:6379@16379 noflags - 0 0 0 disconnected",
			check: func(t *testing.T, e NodeEntry) {
				if e.Role != RoleUnknown || len(e.Flags) != 0 {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "unknown flag kept",
			line: idA + " 10.0.0.1:6379@16379 myself,master,shiny - 0 0 1 connected 0-1",
			check: func(t *testing.T, e NodeEntry) {
				if !e.HasFlag("shiny") || e.Role != RolePrimary {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "ipv6 and hostname",
			line: idA + " fd00::1:6379@16379,my-cluster-8c04d.my-cluster.ns.svc.cluster.local myself,master - 0 0 1 connected",
			check: func(t *testing.T, e NodeEntry) {
				if e.IP != "fd00::1" || e.Port != 6379 || e.BusPort != 16379 ||
					e.Hostname != "my-cluster-8c04d.my-cluster.ns.svc.cluster.local" || e.Addr() != "[fd00::1]:6379" {
					t.Errorf("got %+v, addr %s", e, e.Addr())
				}
			},
		},
		{
			name: "no bus port (old format)",
			line: idA + " 10.0.0.1:6379 myself,master - 0 0 1 connected",
			check: func(t *testing.T, e NodeEntry) {
				if e.Port != 6379 || e.BusPort != 0 || e.Addr() != "10.0.0.1:6379" {
					t.Errorf("got %+v", e)
				}
			},
		},
		{
			name: "scattered single slots are merged",
			line: idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected 5 0-3 4 7",
			check: func(t *testing.T, e NodeEntry) {
				if want := (SlotRanges{{Start: 0, End: 5}, {Start: 7, End: 7}}); !slices.Equal(e.Slots, want) {
					t.Errorf("slots %v, want %v", e.Slots, want)
				}
			},
		},
		{
			name: "crlf line endings",
			line: idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected 0-16383\r",
			check: func(t *testing.T, e NodeEntry) {
				if e.Slots.Count() != SlotCount {
					t.Errorf("slots %v", e.Slots)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClusterNodes(tt.line + "\n")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d entries", len(got))
			}
			tt.check(t, got[0])
		})
	}
}

func TestParseClusterNodesRejects(t *testing.T) {
	good := idA + " 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-5460"
	tests := []struct {
		name, text, wantErr string
	}{
		{"too few fields", idA + " 10.0.0.1:6379@16379 master - 0 0 1", "line 1: want at least 8 fields"},
		{"short id", "abc 10.0.0.1:6379@16379 master - 0 0 1 connected", "node id"},
		{"upper-case id", strings.ToUpper(idA) + " 10.0.0.1:6379@16379 master - 0 0 1 connected", "node id"},
		{"no port", idA + " 10.0.0.1 master - 0 0 1 connected", "no port"},
		{"bad port", idA + " 10.0.0.1:70000@16379 master - 0 0 1 connected", "port"},
		{"bad bus port", idA + " 10.0.0.1:6379@x master - 0 0 1 connected", "bus port"},
		{"bad primary", idA + " 10.0.0.1:6379@16379 slave nope 0 0 1 connected", "primary"},
		{"bad ping", idA + " 10.0.0.1:6379@16379 master - x 0 1 connected", "ping sent"},
		{"negative pong", idA + " 10.0.0.1:6379@16379 master - 0 -1 1 connected", "pong received"},
		{"bad epoch", idA + " 10.0.0.1:6379@16379 master - 0 0 -1 connected", "config epoch"},
		{"bad link", idA + " 10.0.0.1:6379@16379 master - 0 0 1 up", "link state"},
		{"slot out of range", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected 0-16384", "slot"},
		{"reversed range", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected 10-5", "end before start"},
		{"open slot unclosed", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected [100->-" + idB, "closing bracket"},
		{"open slot bad arrow", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected [100-?-" + idB + "]", "want [slot->-id]"},
		{"open slot bad id", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected [100->-xyz]", "migrating slot"},
		{"open slot bad slot", idA + " 10.0.0.1:6379@16379 master - 0 0 1 connected [99999-<-" + idB + "]", "importing slot"},
		{"second line bad", good + "\nnonsense", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClusterNodes(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if got != nil {
				t.Errorf("entries returned with an error: %v", got)
			}
		})
	}
}

func TestParseClusterNodesEmpty(t *testing.T) {
	for _, text := range []string{"", "\n", "  \r\n", "vars currentEpoch 3 lastVoteEpoch 0\n"} {
		got, err := ParseClusterNodes(text)
		if err != nil || len(got) != 0 {
			t.Errorf("ParseClusterNodes(%q) = %v, %v", text, got, err)
		}
	}
}

func TestMyself(t *testing.T) {
	entries, err := ParseClusterNodes(readFixture(t, "cluster_nodes_importing.txt"))
	if err != nil {
		t.Fatal(err)
	}
	me, ok := Myself(entries)
	if !ok || me.ID != idB {
		t.Errorf("Myself = %v, %v", me.ID, ok)
	}
	if _, ok := Myself(nil); ok {
		t.Error("Myself(nil) found something")
	}
}

var fixtures = []string{
	"cluster_nodes_fresh.txt",
	"cluster_nodes_formed.txt",
	"cluster_nodes_handshake_migrating.txt",
	"cluster_nodes_importing.txt",
	"cluster_nodes_disconnected.txt",
	"cluster_nodes_fail.txt",
	"nodes_conf.txt",
}

// FuzzParseClusterNodes checks that no input makes the parser panic, and
// that whatever it accepts satisfies the invariants callers rely on.
func FuzzParseClusterNodes(f *testing.F) {
	for _, name := range fixtures {
		f.Add(readFixture(f, name))
	}
	f.Add(idC + " :0@0 master,fail?,noaddr - 1700000000000 1699999999000 3 disconnected 10923-16383\n")
	f.Add(idA + " fd00::1:6379@16379,host myself,master - 0 0 1 connected [1-<-" + idB + "] 5 0-3\n")
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := ParseClusterNodes(text)
		if err != nil {
			return
		}
		for _, e := range entries {
			if len(e.ID) != 40 {
				t.Fatalf("accepted id %q", e.ID)
			}
			if !slices.Equal(e.Slots, e.Slots.Normalize()) {
				t.Fatalf("slots not normalised: %v", e.Slots)
			}
			if e.Port < 0 || e.Port > 65535 || e.BusPort < 0 || e.BusPort > 65535 {
				t.Fatalf("port out of range: %+v", e)
			}
			for _, m := range append(slices.Clone(e.Migrating), e.Importing...) {
				if m.Slot < 0 || m.Slot >= SlotCount || len(m.NodeID) != 40 {
					t.Fatalf("bad open slot %+v", m)
				}
			}
		}
	})
}
