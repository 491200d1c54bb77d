package valkey

import (
	"context"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/liveconf"
)

// The settings applied live, against a real valkey-server: every allowlisted setting is taken by
// one CONFIG SET and read back by one CONFIG GET equal to what was set (liveconf.Equal), a value
// Valkey refuses comes back as its own error, and the observation carries the settings without
// making a node whose user may not CONFIG GET unreachable. Run with PATH starting at Valkey
// 9.1.2's bin folder to check 9.1.2 as well.
func TestConfigLive(t *testing.T) {
	s := startServer(t, Credentials{})
	ctx := context.Background()
	c, err := NewClient(s.addr, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	want := map[string]string{
		"maxmemory": "100mb", "maxmemory-policy": "ALLKEYS-LRU", "maxmemory-samples": "7", "hz": "20",
		"timeout": "300", "maxclients": "500", "slowlog-log-slower-than": "5000", "slowlog-max-len": "256",
		"latency-monitor-threshold": "50", "lazyfree-lazy-eviction": "no",
		"lazyfree-lazy-expire": "no",
	}
	if len(want) != len(liveconf.Keys()) {
		t.Fatalf("the test sets %d settings, the allowlist has %d", len(want), len(liveconf.Keys()))
	}
	if err := c.ConfigSet(ctx, want); err != nil {
		t.Fatalf("ConfigSet(every live setting) = %v", err)
	}
	got, err := c.ConfigGet(ctx, liveconf.Keys()...)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !liveconf.Equal(k, v, got[k]) {
			t.Errorf("%s: set %q, CONFIG GET says %q", k, v, got[k])
		}
	}
	if got["maxmemory"] != "104857600" {
		t.Errorf("maxmemory reads back %q, want bytes", got["maxmemory"])
	}

	err = c.ConfigSet(ctx, map[string]string{"maxmemory-policy": "sometimes"})
	if err == nil || !IsServerError(err) || !strings.Contains(err.Error(), "maxmemory-policy") {
		t.Errorf("ConfigSet(bad policy) = %v, want Valkey's refusal naming the setting", err)
	}
	if got, _ := c.ConfigGet(ctx, "maxmemory-policy"); got["maxmemory-policy"] != "allkeys-lru" {
		t.Errorf("a refused CONFIG SET changed the policy to %q", got["maxmemory-policy"])
	}

	views := Observe(ctx, []string{s.addr}, Credentials{})
	if v := views[0]; !v.Reachable || v.ConfigErr != nil || v.Config["hz"] != "20" || len(v.Config) != len(want) {
		t.Errorf("Observe: reachable %v, config %v, err %v", v.Reachable, v.Config, v.ConfigErr)
	}

	// An operator user from before config|get was granted: reachable, settings unknown.
	if err := c.ACLSetUser(ctx, "op", []string{"on", ">pw", "+@all", "-config|get", "~*"}); err != nil {
		t.Fatal(err)
	}
	views = Observe(ctx, []string{s.addr}, Credentials{Username: "op", Password: "pw"})
	if v := views[0]; !v.Reachable || v.Config != nil || v.ConfigErr == nil {
		t.Errorf("Observe without config|get: reachable %v, config %v, err %v", v.Reachable, v.Config, v.ConfigErr)
	}
}
