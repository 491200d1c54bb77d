package valkeytest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// TestClientThroughTheSeam: the operator's client, through valkey-go, over a scripted node:
// the node sees the commands as sent, the client reads the scripted replies.
func TestClientThroughTheSeam(t *testing.T) {
	ctx := context.Background()
	f := valkeytest.New()
	n := f.Node("10.0.0.1:6379").
		On("CONFIG GET", valkeytest.Map("maxmemory", "64mb", "hz", "10")).
		On("CLUSTER FAILOVER", valkeytest.Err("ERR You should send CLUSTER FAILOVER to a replica")).
		On("CLUSTER COUNTKEYSINSLOT", valkeytest.Int(7))
	c, err := valkey.Dialer(f.Dial).NewClient(n.Addr(), valkey.Credentials{Username: "op", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Meet(ctx, "10.0.0.2", 6379, 16379); err != nil {
		t.Fatal(err)
	}
	got, err := c.ConfigGet(ctx, "hz", "maxmemory")
	if err != nil || got["maxmemory"] != "64mb" || got["hz"] != "10" {
		t.Fatalf("CONFIG GET = %v, %v", got, err)
	}
	err = c.Failover(ctx, valkey.FailoverCoordinated)
	if !valkey.IsServerError(err) || !strings.Contains(err.Error(), "to a replica") {
		t.Fatalf("CLUSTER FAILOVER error = %v, want the scripted refusal", err)
	}
	if k, err := c.CountKeysInSlot(ctx, 42); err != nil || k != 7 {
		t.Fatalf("COUNTKEYSINSLOT = %d, %v", k, err)
	}
	want := []string{
		"10.0.0.1:6379 CLUSTER MEET 10.0.0.2 6379 16379",
		"10.0.0.1:6379 CONFIG GET hz maxmemory",
		"10.0.0.1:6379 CLUSTER FAILOVER",
		"10.0.0.1:6379 CLUSTER COUNTKEYSINSLOT 42",
	}
	if got := f.Commands(); !slices.Equal(got, want) {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range f.Calls() {
		if c.User != "op" {
			t.Fatalf("%s sent as %q, want the handshake's user op", c, c.User)
		}
	}
}

// TestDownNodeRefusesDials: a node that is down cannot be dialled, an unknown address neither.
func TestDownNodeRefusesDials(t *testing.T) {
	f := valkeytest.New()
	n := f.Node("10.0.0.1:6379")
	n.Down(true)
	if _, err := valkey.Dialer(f.Dial).NewClient(n.Addr(), valkey.Credentials{}); err == nil {
		t.Fatal("dialled a node that is down")
	}
	if _, err := valkey.Dialer(f.Dial).NewClient("10.9.9.9:6379", valkey.Credentials{}); err == nil {
		t.Fatal("dialled an address with no node")
	}
	n.Down(false)
	c, err := valkey.Dialer(f.Dial).NewClient(n.Addr(), valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
