package valkeytest_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/slot"
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

// TestServeOverTCP: a node served on a real listener is what valkey-go reaches with the
// operator's ordinary TCP dial (valkey.Dialer nil), as another process would: the commands are
// recorded and counted, a quiet fleet counts without keeping them, and a node that goes down
// drops its connections and refuses the next ones until it is up again.
func TestServeOverTCP(t *testing.T) {
	ctx := context.Background()
	f := valkeytest.New()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := valkeytest.Simulate(f.Node(l.Addr().String()), strings.Repeat("b", 40), "127.0.0.1")
	served := make(chan error, 1)
	go func() { served <- n.Serve(l) }()
	c, err := valkey.NewClient(l.Addr().String(), valkey.Credentials{Username: "op", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AddSlotsRange(ctx, slot.All()); err != nil {
		t.Fatal(err)
	}
	v := valkey.Observe(ctx, []string{l.Addr().String()}, valkey.Credentials{Username: "op", Password: "pw"})[0]
	if !v.ClusterStateOK() || v.ID != strings.Repeat("b", 40) {
		t.Fatalf("observed %+v, want a node of its own serving every slot", v)
	}
	if got := f.Commands(); len(got) == 0 || got[0] != l.Addr().String()+" CLUSTER ADDSLOTSRANGE 0 16383" {
		t.Fatalf("commands %v", got)
	}
	before, kept := f.Received(), len(f.Calls())
	f.Quiet()
	if _, err := c.Info(ctx, "server"); err != nil {
		t.Fatal(err)
	}
	if f.Received() != before+1 || len(f.Calls()) != kept {
		t.Fatalf("a quiet fleet: received %d (was %d), kept %d (was %d), want one more counted and none kept", f.Received(), before, len(f.Calls()), kept)
	}

	n.Down(true)
	if _, err := c.Info(ctx, "server"); err == nil {
		t.Fatal("a node that is down answered on its old connection")
	}
	if _, err := valkey.NewClient(l.Addr().String(), valkey.Credentials{}); err == nil {
		t.Fatal("a node that is down took a new client")
	}
	n.Down(false)
	c2, err := valkey.NewClient(l.Addr().String(), valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	_ = l.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve returned %v after Close, want net.ErrClosed", err)
	}
}

// TestSimulatedACL: a simulated node keeps the users ACL SETUSER gives it, as ACL LIST prints
// them, so that a second ACL pass finds nothing to change.
func TestSimulatedACL(t *testing.T) {
	ctx := context.Background()
	f := valkeytest.New()
	n := valkeytest.Simulate(f.Node("10.0.0.1:6379"), strings.Repeat("a", 40), "10.0.0.1")
	c, err := valkey.Dialer(f.Dial).NewClient(n.Addr(), valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.ACLSetUser(ctx, "app", []string{"reset", "on", "#abc", "~app:*", "+get"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ACLSetUser(ctx, "gone", []string{"reset", "off"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ACLDelUser(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	got, err := c.ACLList(ctx)
	want := []string{"user app on #abc ~app:* +get", "user default on nopass sanitize-payload ~* &* +@all"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ACL LIST = %q, %v, want %q", got, err, want)
	}
}

// TestFleetServesByAddress: one wildcard listener serves every node of the fleet, each
// connection as the node whose loopback address was dialled; an address with no node is
// closed.
func TestFleetServesByAddress(t *testing.T) {
	ctx := context.Background()
	probe, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(probe.Addr().String())
	f := valkeytest.New()
	for i, ip := range []string{"127.10.0.1", "127.10.0.2"} {
		valkeytest.Simulate(f.Node(net.JoinHostPort(ip, port)), strings.Repeat(strconv.Itoa(i+1), 40), ip)
	}
	served := make(chan error, 1)
	go func() { served <- f.Serve(probe) }()
	for i, ip := range []string{"127.10.0.1", "127.10.0.2"} {
		v := valkey.Observe(ctx, []string{net.JoinHostPort(ip, port)}, valkey.Credentials{})[0]
		if v.ID != strings.Repeat(strconv.Itoa(i+1), 40) {
			t.Fatalf("%s answered as %q (%v)", ip, v.ID, v.Err)
		}
	}
	if v := valkey.Observe(ctx, []string{net.JoinHostPort("127.10.0.3", port)}, valkey.Credentials{})[0]; v.Reachable {
		t.Fatal("an address with no node answered")
	}
	_ = probe.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve returned %v after Close, want net.ErrClosed", err)
	}
}
