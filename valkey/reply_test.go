package valkey

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// helloReply is what a Valkey 8 node answers valkey-go's HELLO 3.
const helloReply = "%4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n8.0.1\r\n$5\r\nproto\r\n:3\r\n$4\r\nmode\r\n$7\r\ncluster\r\n"

// replyCases are streams the follower takes (ok) or refuses, and why.
var replyCases = []struct {
	name, in string
	ok       bool
}{
	{"simple string", "+OK\r\n", true},
	{"error", "-ERR unknown command\r\n", true},
	{"integer", ":0\r\n:-12\r\n:9223372036854775807\r\n", true},
	{"blob", "$3\r\nabc\r\n", true},
	{"empty blob", "$0\r\n\r\n", true},
	{"null blob", "$-1\r\n", true},
	{"null array", "*-1\r\n", true},
	{"empty array", "*0\r\n", true},
	{"array", "*2\r\n$1\r\na\r\n:1\r\n", true},
	{"map", "%1\r\n+k\r\n+v\r\n", true},
	{"set", "~1\r\n+x\r\n", true},
	{"null", "_\r\n", true},
	{"booleans", "#t\r\n#f\r\n", true},
	{"double", ",1.5e10\r\n,inf\r\n", true},
	{"big number", "(3492890328409238509324850943850943825024385\r\n", true},
	{"verbatim", "=7\r\ntxt:abc\r\n", true},
	{"blob error", "!3\r\nERR\r\n", true},
	{"attribute before a value", "|1\r\n+a\r\n+b\r\n:5\r\n", true},
	{"attribute inside an array", "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", true},
	{"empty attribute", "|0\r\n:1\r\n", true},
	{"nested", "*1\r\n*1\r\n%1\r\n+k\r\n*2\r\n:1\r\n:2\r\n", true},
	{"hello", helloReply, true},
	{"replies one after the other", "+OK\r\n$3\r\nabc\r\n*1\r\n:1\r\n", true},

	{"blob length -2", "$-2\r\n", false},
	{"push", ">2\r\n+a\r\n+b\r\n", false},
	{"subscribe push", ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", false},
	{"array length -2", "*-2\r\n", false},
	{"map length -1", "%-1\r\n", false},
	{"attribute length -1", "|-1\r\n", false},
	{"streamed blob", "$?\r\n;3\r\nabc\r\n;0\r\n", false},
	{"streamed array", "*?\r\n:1\r\n.\r\n", false},
	{"chunk", ";3\r\nabc\r\n", false},
	{"end", ".\r\n", false},
	{"unknown type", "x\r\n", false},
	{"length not a number", "$abc\r\n", false},
	{"length missing", "$\r\n", false},
	{"length of a lone sign", "$-\r\n", false},
	{"integer not a number", ":1x\r\n", false},
	{"line without CR", "+OK\n", false},
	{"CR inside a line", "+O\rK\r\n", false},
	{"blob without its CRLF", "$3\r\nabcd\r\n", false},
	{"null with content", "_x\r\n", false},
	{"boolean not t or f", "#x\r\n", false},
	{"boolean too long", "#tt\r\n", false},
	{"length out of range", "$99999999999999999999\r\n", false},
	{"blob over the cap", "$16777217\r\n", false},
	{"array over the cap", "*300000\r\n", false},
	{"array the earlier impostor sent", "*4611686018427387904\r\n", false},
	{"map over the cap", "%200000\r\n", false},
	{"too deep", strings.Repeat("*1\r\n", maxReplyDepth+1) + ":1\r\n", false},
}

// feedAll feeds in to f in pieces of size n (the whole stream when n is 0).
func feedAll(f *replyFollower, in string, n int) error {
	if n == 0 {
		return f.feed([]byte(in))
	}
	for i := 0; i < len(in); i += n {
		if err := f.feed([]byte(in[i:min(i+n, len(in))])); err != nil {
			return err
		}
	}
	return nil
}

// TestReplyFollower: every stream gets the same verdict however its bytes arrive (whole, one at
// a time, in threes); one taken ends between replies, its cost back to 0.
func TestReplyFollower(t *testing.T) {
	for _, tc := range replyCases {
		for _, n := range []int{0, 1, 3} {
			f := newReplyFollower(MaxReply)
			err := feedAll(f, tc.in, n)
			if tc.ok && err != nil {
				t.Errorf("%s (pieces of %d): refused: %v", tc.name, n, err)
			}
			if !tc.ok && err == nil {
				t.Errorf("%s (pieces of %d): taken", tc.name, n)
			}
			if tc.ok && (f.state != atType || len(f.stack) != 0 || f.cost != 0) {
				t.Errorf("%s (pieces of %d): not at a reply's end: state %d, %d open, cost %d", tc.name, n, f.state, len(f.stack), f.cost)
			}
		}
	}
}

// TestReplyCostIsPerReply: the cap bounds one reply, not the connection; a long line and a
// long blob are refused as they come.
func TestReplyCostIsPerReply(t *testing.T) {
	f := newReplyFollower(16)
	for range 100 {
		if err := f.feed([]byte("$6\r\nabcdef\r\n")); err != nil { // 12 bytes, 6 declared: 12
			t.Fatal(err)
		}
	}
	if err := newReplyFollower(16).feed([]byte("+" + strings.Repeat("a", 16))); !IsReplyRefused(err) {
		t.Errorf("a line longer than the cap: %v", err)
	}
	if err := newReplyFollower(16).feed([]byte("$15\r\n")); !IsReplyRefused(err) {
		t.Errorf("a blob longer than the cap, refused at its header: %v", err)
	}
	if err := newReplyFollower(16 * elementCost).feed([]byte("*16\r\n")); !IsReplyRefused(err) {
		t.Errorf("an array whose elements cost more than the cap: %v", err)
	}
}

// TestRepliesAnswerCommands: a reply takes one of the commands written; one more is refused
// (valkey-go panics on a reply nothing waits for). The count follows commands however they are
// written.
func TestRepliesAnswerCommands(t *testing.T) {
	var w commandCounter
	cmds := "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\n*\r\n$4\r\n$1\r\n\r\n"
	var n int64
	for i := range len(cmds) {
		n += w.feed([]byte{cmds[i]})
	}
	if n != 2 || w.state != cmdAt {
		t.Fatalf("%d commands counted, state %d", n, w.state)
	}
	var pending atomic.Int64
	pending.Store(n)
	f := newReplyFollower(MaxReply)
	f.pending = &pending
	if err := f.feed([]byte("+PONG\r\n|1\r\n+a\r\n+b\r\n+OK\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.feed([]byte("+OK\r\n")); !IsReplyRefused(err) {
		t.Errorf("a third reply to two commands: %v", err)
	}
}

// TestElementCost: what the follower charges for an element covers what valkey-go allocates for
// it.
func TestElementCost(t *testing.T) {
	if s := unsafe.Sizeof(valkeygo.ValkeyMessage{}); s > elementCost {
		t.Errorf("a ValkeyMessage is %d bytes, elementCost %d", s, elementCost)
	}
}

// TestMalformedReplyIsAnError: a node that answers `$-2` (which made valkey-go v1.0.79 panic
// on its own goroutine, ending the process) or an array no client can allocate costs the caller
// an error, over a connection the seam opened, during the handshake or after it.
func TestMalformedReplyIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"$-2\r\n", "*-2\r\n", "%-1\r\n", "*4611686018427387904\r\n"} {
		fleet := valkeytest.New()
		const addr = "10.0.0.1:6379"
		node := fleet.Node(addr)
		node.On("CLUSTER NODES", valkeytest.Raw(bad))
		c, err := Dialer(fleet.Dial).NewClient(addr, Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ClusterNodes(ctx); !IsReplyRefused(err) {
			t.Errorf("%q: CLUSTER NODES: %v", bad, err)
		}
		v := observeWith(ctx, c, NodeView{Addr: addr})
		if v.Reachable || v.Err == nil {
			t.Errorf("%q: observed as %+v", bad, v)
		}
		c.Close()

		node.On("HELLO", valkeytest.Raw(bad))
		if c, err := Dialer(fleet.Dial).NewClient(addr, Credentials{}); err == nil {
			c.Close()
			t.Errorf("%q in the handshake: connected", bad)
		}
		var p Pool
		p.Dial = fleet.Dial
		if v := p.Observe(ctx, "ns/vc", []string{addr}, Credentials{}); v[0].Reachable || v[0].Err == nil {
			t.Errorf("%q: the pool observed %+v", bad, v[0])
		}
		p.Forget("ns/vc")
	}
}

// FuzzClientReads: whatever a node answers, the client returns (an answer or an error) and the
// process goes on. valkey-go reads replies on a goroutine of its own, so a panic there (before
// reply.go, `$-2`) ends the fuzz run.
func FuzzClientReads(f *testing.F) {
	for _, tc := range replyCases {
		f.Add(tc.in)
	}
	f.Add("$5\r\nab")     // cut short
	f.Add("*2\r\n:1\r\n") // one element missing
	f.Fuzz(func(t *testing.T, reply string) {
		fleet := valkeytest.New()
		const addr = "10.0.0.1:6379"
		fleet.Node(addr).On("CLUSTER MYID", valkeytest.Raw(reply))
		c, err := Dialer(fleet.Dial).NewClient(addr, Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A reply cut short costs the whole wait: kept short, or the fuzzer's minimizing of such
		// inputs (one wait each) looks like a hang.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, _ = c.MyID(ctx)
	})
}

// FuzzReplyFollower: the follower itself never panics, however the bytes are split.
func FuzzReplyFollower(f *testing.F) {
	for _, tc := range replyCases {
		f.Add(tc.in, uint8(1))
	}
	f.Fuzz(func(t *testing.T, in string, n uint8) {
		_ = feedAll(newReplyFollower(1<<16), in, int(n))
	})
}
