package valkey

import (
	"strings"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// TestObserveAfterTheNodeClosedAnIdleConnection: a node that is up is reached by the next
// observation even when it closed the pool's connection while the connection sat idle between
// two looks: Valkey does so to a client idle for longer than its `timeout` setting (a live
// setting a ValkeyConfig may set, 3 s say, below the 4–5 s between looks at a Ready cluster), and
// a node whose container restarted in its pod (same IP) closed every connection it had. Nothing
// on the operator's side pings the connection in between (IdleCheck is above the look period):
// the observation must not report a node that answers at once as unreachable.
func TestObserveAfterTheNodeClosedAnIdleConnection(t *testing.T) {
	fleet := valkeytest.New()
	const addr = "10.0.0.1:6379"
	n := valkeytest.Simulate(fleet.Node(addr), strings.Repeat("a", 40), "10.0.0.1")
	p := &Pool{Dial: fleet.Dial}
	t.Cleanup(func() { p.Forget("ns/vc") })
	if v := p.Observe(t.Context(), "ns/vc", []string{addr}, Credentials{}); !v[0].Reachable {
		t.Fatalf("first observation: %v", v[0].Err)
	}
	// The node closes its end of every connection, as Valkey's idle timeout does, and keeps serving.
	n.Down(true)
	n.Down(false)
	// However soon after: before valkey-go's own idle check (valkey-go's default, 1 s, found such
	// a connection only if it ran between the close and the look; IdleCheck, 10 s, never does
	// between looks 4–5 s apart).
	if v := p.Observe(t.Context(), "ns/vc", []string{addr}, Credentials{}); !v[0].Reachable {
		t.Fatalf("the node is up, but the observation after it closed an idle connection found it unreachable: %v", v[0].Err)
	}
	// A node that went away is still unreachable, at once.
	n.Down(true)
	start := time.Now()
	if v := p.Observe(t.Context(), "ns/vc", []string{addr}, Credentials{}); v[0].Reachable {
		t.Fatal("a node that went away was found reachable")
	}
	if d := time.Since(start); d > RedialWithin+100*time.Millisecond {
		t.Fatalf("the observation of a node that went away took %s", d)
	}
}
