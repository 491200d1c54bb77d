package valkey

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// connectionsReceived is the server's total_connections_received, read over c.
func connectionsReceived(t *testing.T, c *Client) string {
	t.Helper()
	stats, err := c.Info(t.Context(), "stats")
	if err != nil {
		t.Fatal(err)
	}
	return stats["total_connections_received"]
}

// TestIntegrationPoolReusesAndCloses checks, against a real server, that the pool keeps one
// connection per node across observations and closes it when the node leaves, when the
// credentials change and when the node stops answering.
func TestIntegrationPoolReusesAndCloses(t *testing.T) {
	ctx := t.Context()
	creds := Credentials{Password: "s3cret"}
	s := startServer(t, creds, "--requirepass", creds.Password)
	const cluster = "ns/vc"
	var p Pool

	observe := func(ctx context.Context) NodeView {
		t.Helper()
		v := p.Observe(ctx, cluster, []string{s.addr}, creds)
		if len(v) != 1 {
			t.Fatalf("%d views", len(v))
		}
		return v[0]
	}
	if v := observe(ctx); !v.Reachable || v.ID == "" {
		t.Fatalf("first observation: %+v", v)
	}
	c1, err := p.Client(cluster, s.addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	before := connectionsReceived(t, c1)
	for range 3 {
		if v := observe(ctx); !v.Reachable {
			t.Fatalf("observation: %v", v.Err)
		}
	}
	c2, err := p.Client(cluster, s.addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	if c2 != c1 {
		t.Fatal("a second pass dialled a new client for the same node and credentials")
	}
	if after := connectionsReceived(t, c1); after != before {
		t.Fatalf("the server accepted new connections (%s, then %s): the pool did not reuse its client", before, after)
	}

	// The node leaves the cluster's live set: its client is closed.
	p.Retain(cluster, []string{"10.0.0.1:6379"})
	if n := p.Len(cluster); n != 0 {
		t.Fatalf("%d clients after the node left", n)
	}
	if err := c1.Ping(ctx); err == nil {
		t.Fatal("the client of a node that left still answers: it was not closed")
	}

	// Other credentials (the same password for the default user, named): a new client, the old
	// one closed.
	c3, err := p.Client(cluster, s.addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	named := Credentials{Username: "default", Password: creds.Password}
	c4, err := p.Client(cluster, s.addr, named)
	if err != nil {
		t.Fatal(err)
	}
	if c4 == c3 {
		t.Fatal("changed credentials reused the client opened with the old ones")
	}
	if err := c3.Ping(ctx); err == nil {
		t.Fatal("the client of the old credentials was not closed")
	}
	if err := c4.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// A node that stops answering (SIGSTOP: the socket stays open, nothing replies) is marked
	// unreachable within the caller's deadline and its client dropped once its query times out,
	// so a later pass dials afresh instead of queueing behind it.
	creds = named
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if v := observe(short); v.Reachable || v.Err == nil {
		t.Fatalf("a stopped node observed as reachable: %+v", v)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("observing a stopped node took %s, past the caller's deadline", d)
	}
	// The observation goes on without the caller, up to CommandTimeout, and then drops the
	// client.
	for deadline := time.Now().Add(CommandTimeout + 2*time.Second); p.Len(cluster) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients kept for a node that stopped answering", p.Len(cluster))
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if v := observe(ctx); !v.Reachable {
		t.Fatalf("node resumed but unreachable: %v", v.Err)
	}
	p.Forget(cluster)
	if n := p.Len(cluster); n != 0 {
		t.Fatalf("%d clients after Forget", n)
	}
}

// TestIntegrationPoolDoesNotWaitForSilentNodes: a pass decides from the nodes that answered, so
// a node that stops answering (SIGSTOP: its socket open, nothing replied, as behind a network
// cut) costs one observation at most ObserveTimeout, and the observations after it no more than
// the answering nodes show the machine needs (silentGrace here, where they answer in
// milliseconds), while the other node's view arrives whole every time. Once it answers again
// it is reachable at the next observation or the one after (its dial may complete after the
// first gave up on it).
func TestIntegrationPoolDoesNotWaitForSilentNodes(t *testing.T) {
	ctx := t.Context()
	creds := Credentials{Password: "s3cret"}
	a := startServer(t, creds, "--requirepass", creds.Password)
	b := startServer(t, creds, "--requirepass", creds.Password)
	const cluster = "ns/vc"
	var p Pool
	observe := func() ([]NodeView, time.Duration) {
		t.Helper()
		start := time.Now()
		v := p.Observe(ctx, cluster, []string{a.addr, b.addr}, creds)
		return v, time.Since(start)
	}
	if v, _ := observe(); !v[0].Reachable || !v[1].Reachable {
		t.Fatalf("first observation: %v / %v", v[0].Err, v[1].Err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) })

	v, took := observe()
	if !v[0].Reachable || v[1].Reachable {
		t.Fatalf("one node stopped: reachable %v / %v (%v)", v[0].Reachable, v[1].Reachable, v[1].Err)
	}
	if took > ObserveTimeout+500*time.Millisecond {
		t.Fatalf("the first observation of a stopped node took %s: it must give up after %s", took, ObserveTimeout)
	}
	for range 3 {
		v, took = observe()
		if !v[0].Reachable || v[1].Reachable {
			t.Fatalf("one node stopped: reachable %v / %v", v[0].Reachable, v[1].Reachable)
		}
		// The behaviour under test, not a speed: a node silent last time is not waited for the
		// full ObserveTimeout while its peer answers at once.
		if took >= ObserveTimeout {
			t.Fatalf("a node silent since the last observation held the next one %s, the full timeout", took)
		}
	}
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		v, _ = observe()
		if v[0].Reachable && v[1].Reachable {
			break
		}
		if i == 2 {
			t.Fatalf("a node that answers again is still unreachable after %d observations: %v", i+1, v[1].Err)
		}
	}
}

// delayProxy forwards TCP to a node and holds every reply back by delay: a node that answers,
// slowly.
type delayProxy struct {
	addr  string
	delay atomic.Int64
	conns atomic.Int64
}

func startDelayProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &delayProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() {
				defer func() { _ = c.Close() }()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						time.Sleep(time.Duration(p.delay.Load()))
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestIntegrationPoolSlowNodeRecovers: a node that answers every command, slowly (70 ms), and
// once missed an observation (a 1.5 s stall) is not reported unreachable from then on: its late
// answer clears the silent mark, and the observations after wait for it in full again, over the
// connection it already has.
func TestIntegrationPoolSlowNodeRecovers(t *testing.T) {
	ctx := t.Context()
	creds := Credentials{Password: "s3cret"}
	a := startServer(t, creds, "--requirepass", creds.Password)
	b := startServer(t, creds, "--requirepass", creds.Password)
	px := startDelayProxy(t, b.addr)
	px.delay.Store(int64(70 * time.Millisecond))
	const cluster = "ns/vc"
	var p Pool
	addrs := []string{a.addr, px.addr}
	for i := range 3 {
		if v := p.Observe(ctx, cluster, addrs, creds); !v[1].Reachable {
			t.Fatalf("pass %d: %v", i, v[1].Err)
		}
	}
	px.delay.Store(int64(1500 * time.Millisecond))
	if v := p.Observe(ctx, cluster, addrs, creds); v[1].Reachable {
		t.Fatal("a node stalled 1.5 s answered within the observation")
	}
	px.delay.Store(int64(70 * time.Millisecond))
	time.Sleep(2 * time.Second)
	conns := px.conns.Load()
	unreachable := 0
	for range 10 {
		if v := p.Observe(ctx, cluster, addrs, creds); !v[1].Reachable {
			unreachable++
		}
		time.Sleep(300 * time.Millisecond)
	}
	if unreachable > 1 {
		t.Errorf("a node answering every command in 70 ms was reported unreachable by %d of 10 observations after one stall", unreachable)
	}
	if n := px.conns.Load() - conns; n > 1 {
		t.Errorf("%d connections dialled to the slow node in 10 observations: its client was dropped", n)
	}
}

// TestIntegrationPoolForgetWinsOverALateDial: a dial that completes after its cluster was
// forgotten (the cluster deleted while a node did not answer) leaves no client behind.
func TestIntegrationPoolForgetWinsOverALateDial(t *testing.T) {
	ctx := t.Context()
	creds := Credentials{Password: "s3cret"}
	s := startServer(t, creds, "--requirepass", creds.Password)
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
	const cluster = "ns/vc"
	var p Pool
	if v := p.Observe(ctx, cluster, []string{s.addr}, creds); v[0].Reachable {
		t.Fatal("a stopped node observed as reachable")
	}
	p.Forget(cluster)
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(CommandTimeout + time.Second)
	if n := p.Len(cluster); n != 0 {
		t.Fatalf("%d client(s) of a forgotten cluster in the pool: a late dial kept it", n)
	}
}
