package main

import (
	"strings"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// DEFAULT_ZONE_SPREAD, as reference/operator-configuration.md describes it: absent means
// bestEffort, the two spellings of placement.zoneSpread are accepted, anything else fails
// startup with a message that says where to fix it.
func TestParseZoneSpread(t *testing.T) {
	for value, want := range map[string]v1.ZoneSpread{"": v1.ZoneSpreadBestEffort, "bestEffort": v1.ZoneSpreadBestEffort, "required": v1.ZoneSpreadRequired} {
		if got, err := parseZoneSpread(value); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"strict", "BestEffort", "Required", " required"} {
		got, err := parseZoneSpread(value)
		if err == nil || string(got) != value {
			t.Fatalf("%q accepted as %q", value, got)
		}
		for _, part := range []string{"DEFAULT_ZONE_SPREAD", "defaultZoneSpread", "valkey-operator-config", `"bestEffort" or "required"`} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%q: error %q does not name %s", value, err, part)
			}
		}
	}
}

// DEFAULT_NETWORK_POLICY the same way: absent means Enabled.
func TestParseNetworkPolicy(t *testing.T) {
	for value, want := range map[string]v1.NetworkPolicyMode{"": v1.NetworkPolicyEnabled, "Enabled": v1.NetworkPolicyEnabled, "Disabled": v1.NetworkPolicyDisabled} {
		if got, err := parseNetworkPolicy(value); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"off", "disabled", "true"} {
		got, err := parseNetworkPolicy(value)
		if err == nil || string(got) != value {
			t.Fatalf("%q accepted as %q", value, got)
		}
		for _, part := range []string{"DEFAULT_NETWORK_POLICY", "defaultNetworkPolicy", "valkey-operator-config"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%q: error %q does not name %s", value, err, part)
			}
		}
	}
}

// A restarted container of the same pod holds the lease under the same name; without a pod name
// every process is a holder of its own.
func TestLeaderIdentity(t *testing.T) {
	if got := leaderIdentity("valkey-operator-7d9f-abcde", "host"); got != "valkey-operator-7d9f-abcde" {
		t.Errorf("with POD_NAME: %q", got)
	}
	a, b := leaderIdentity("", "host"), leaderIdentity("", "host")
	if a == b || !strings.HasPrefix(a, "host_") {
		t.Errorf("without POD_NAME: %q and %q, want two different host_<uuid>", a, b)
	}
}
