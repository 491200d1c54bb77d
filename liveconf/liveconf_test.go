package liveconf

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// The expectations are what valkey-server 8.0.1 and 9.1.2 printed back with CONFIG GET after
// CONFIG SET of the value on the left.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ key, in, want string }{
		{"maxmemory", "100mb", "104857600"},
		{"maxmemory", "100MB", "104857600"},
		{"maxmemory", "1gb", "1073741824"},
		{"maxmemory", "1G", "1000000000"},
		{"maxmemory", "1024k", "1024000"},
		{"maxmemory", "104857600", "104857600"},
		{"maxmemory", "0", "0"},
		{"maxmemory", "lots", "lots"},
		{"maxmemory", "mb", "mb"},
		{"MAXMEMORY", "1kb", "1024"},
		{"maxmemory-policy", "ALLKEYS-LRU", "allkeys-lru"},
		{"lazyfree-lazy-expire", "YES", "yes"},
		{"hz", "1000", "500"},
		{"hz", "0", "1"},
		{"hz", "20", "20"},
		// Valkey refuses these (string2ll): compared as written, so CONFIG SET says so.
		{"timeout", "0300", "0300"},
		{"timeout", "+300", "+300"},
		{"maxclients", "+10", "+10"},
		{"hz", "-1", "-1"},
		{"timeout", "-1", "-1"},
		{"loglevel", "NOTICE", "NOTICE"}, // not live: compared as written
	} {
		if got := Normalize(tc.key, tc.in); got != tc.want {
			t.Errorf("Normalize(%q, %q) = %q, want %q", tc.key, tc.in, got, tc.want)
		}
	}
}

func TestLiveAndRestartSplit(t *testing.T) {
	s := map[string]string{"maxmemory": "1gb", "Hz": "20", "appendonly": "yes", "port": "6379", "requirepass": "x"}
	if got, want := Live(s), map[string]string{"maxmemory": "1gb", "hz": "20"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Live = %v, want %v", got, want)
	}
	if got, want := WithoutLive(s), map[string]string{"appendonly": "yes", "port": "6379", "requirepass": "x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("WithoutLive = %v, want %v", got, want)
	}
	if Live(map[string]string{"port": "1"}) != nil {
		t.Error("Live of no live setting is not nil")
	}
}

// Nothing the operator forces, and no secret, is ever applied live.
func TestAllowlistExcludesForcedAndSecret(t *testing.T) {
	for _, k := range []string{"port", "bind", "protected-mode", "daemonize", "dir", "cluster-enabled", "cluster-config-file",
		"cluster-node-timeout", "cluster-port", "aclfile", "include", "masterauth", "masteruser", "requirepass",
		"tls-port", "tls-cert-file", "appendonly", "save", "shutdown-on-sigterm", "cluster-announce-hostname"} {
		if IsLive(k) {
			t.Errorf("%s is live", k)
		}
	}
	if len(Keys()) != 11 {
		t.Errorf("Keys() = %v", Keys())
	}
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		desired, recorded, observed map[string]string
		want                        []Change
	}{
		{name: "in agreement, units aside",
			desired:  map[string]string{"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru", "port": "6379"},
			recorded: map[string]string{"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru"},
			observed: map[string]string{"maxmemory": "104857600", "maxmemory-policy": "allkeys-lru"}},
		{name: "desired changed",
			desired:  map[string]string{"maxmemory": "200mb", "maxmemory-policy": "ALLKEYS-LFU"},
			recorded: map[string]string{"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru"},
			observed: map[string]string{"maxmemory": "104857600", "maxmemory-policy": "allkeys-lru"},
			want:     []Change{{"maxmemory", "200mb", "104857600"}, {"maxmemory-policy", "ALLKEYS-LFU", "allkeys-lru"}}},
		{name: "drift: set by hand",
			desired:  map[string]string{"maxmemory": "100mb"},
			recorded: map[string]string{"maxmemory": "100mb"},
			observed: map[string]string{"maxmemory": "5"},
			want:     []Change{{"maxmemory", "100mb", "5"}}},
		{name: "removed: back to the default",
			desired:  map[string]string{},
			recorded: map[string]string{"hz": "20"},
			observed: map[string]string{"hz": "20"},
			want:     []Change{{"hz", "10", "20"}}},
		{name: "removed, already default",
			recorded: map[string]string{"hz": "20"},
			observed: map[string]string{"hz": "10"}},
		{name: "not observed: unknown, left alone",
			desired:  map[string]string{"maxmemory": "1gb"},
			observed: map[string]string{}},
		{name: "unmanaged setting changed by hand is not ours",
			desired:  map[string]string{"maxmemory": "1gb"},
			observed: map[string]string{"maxmemory": "1073741824", "hz": "50"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diff(tc.desired, tc.recorded, tc.observed); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Diff = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSameLive(t *testing.T) {
	a := map[string]string{"maxmemory": "1gb", "port": "1"}
	if !SameLive(a, map[string]string{"maxmemory": "1073741824", "port": "2"}) {
		t.Error("1gb and 1073741824 differ")
	}
	if SameLive(a, map[string]string{"port": "1"}) {
		t.Error("a removed live setting is the same")
	}
}

// The ValkeyNode CEL rule that lets the live settings of a node's record change repeats the
// allowlist (CEL cannot call Go): it must name exactly Keys().
func TestCELRuleNamesTheAllowlist(t *testing.T) {
	src, err := os.ReadFile("../apis/v1alpha1/valkeynode_types.go")
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, 0, len(Keys()))
	for _, k := range Keys() {
		quoted = append(quoted, "'"+k+"'")
	}
	list := "k in [" + strings.Join(quoted, ", ") + "]"
	if n := strings.Count(string(src), list); n != 2 {
		t.Errorf("valkeynode_types.go holds %q %d times, want 2 (both directions of the valkeySettings rule)", list, n)
	}
}
