package valkey

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync/atomic"
)

// Every reply a node sends is checked on its way in, before valkey-go reads it, by a small RESP2
// and RESP3 follower on the connection's Read path (guardReplies, below the client: the seam,
// valkey.Dialer, hands it every connection, production and scripted alike).
//
// Why: a node is anybody's to answer for. A team's own node runs with its default user open, and
// until the operator knew its node pods by UID (controllers/identity.go) a pod the team made under
// a node's name was asked like a node. valkey-go (v1.0.79) trusts the lengths a reply declares:
// `$-2` reaches make([]byte, -2) and panics ("makeslice: len out of range", in readB), a huge
// `*n` or `$n` is allocated before a byte of it arrives, a line without end is read whole, and
// nesting is followed by recursion. It reads on a goroutine of its own, where no recover of ours
// can reach, so one such reply stopped the operator for every team. Upstream's fix
// (valkey-io/valkey-go#183, "reject invalid message lengths") is open as of this writing; the
// follower stays until a release refuses these itself, and keeps the size cap after that.
//
// What it refuses, ending the connection with a *ReplyError as the read's error (valkey-go then
// fails every command waiting on the connection with it, and the pool dials afresh next time):
//   - a length below -1 (-1 is RESP2's null), a map or attribute of length -1, a streamed
//     (`?`) length, which Valkey never sends, and the end-of-stream and chunk types;
//   - a type byte RESP does not have, a number that is not one, a line not ended by CRLF, a
//     boolean other than t or f, a null with content, a blob not followed by CRLF;
//   - nesting deeper than maxReplyDepth;
//   - a push message (`>`): the operator neither subscribes nor tracks keys, and valkey-go panics
//     ("protocol bug") on a subscribe push that answers an ordinary command;
//   - a reply to no command: valkey-go panics ("protocol bug") on a reply with nothing waiting
//     for it, so the commands written on the connection are counted (commandCounter) and each
//     complete reply takes one;
//   - a reply that would cost more than its cap: every byte received, every blob's declared
//     length (valkey-go allocates it at once), and elementCost for every element an aggregate
//     declares (one ValkeyMessage each, allocated at once).

// MaxReply is the most one reply may cost (see above), by default. The largest replies the
// operator asks for in normal work are far below it: CLUSTER NODES of a cluster of hundreds of
// nodes is under 1 MiB, INFO and CONFIG GET a few KiB, ACL LIST at most about the ACL file (its
// Secret holds at most 1 MiB), and a slot mover's CLUSTER GETKEYSINSLOT batch is 1 000 key names
// (16 MiB leaves 16 KiB a name; Valkey's own limit on one string is 512 MB). What it bounds is
// what one hostile or broken node can make the operator hold per connection it reads at once,
// instead of whatever the node declares. A classic slot move of a slot whose 1 000 keys average
// more than about 16 KiB a name fails, and says why; Valkey 9's atomic moves read no key names.
const MaxReply = 16 << 20

// elementCost is what valkey-go allocates for each element an aggregate declares before it
// reads any: one ValkeyMessage (40 bytes in v1.0.79; reply_test.go checks it stays within).
const elementCost = 64

// maxReplyDepth bounds nesting: valkey-go reads an aggregate's elements by recursion. The
// deepest reply the operator reads (ACL GETUSER's selectors, CLUSTER SHARDS) nests four.
const maxReplyDepth = 32

// ReplyError is a reply refused by the follower: what was wrong with it. The connection it came
// on is closed.
type ReplyError struct{ Reason string }

func (e *ReplyError) Error() string { return "reply refused: " + e.Reason }

// IsReplyRefused reports whether err is, or wraps, a reply the follower refused.
func IsReplyRefused(err error) bool {
	var re *ReplyError
	return errors.As(err, &re)
}

// The follower's states: what the next byte is.
const (
	atType    = iota // a value's type byte
	inLine           // a line, up to its CRLF
	inBlob           // a blob's payload
	atBlobCR         // the CR after a blob's payload
	atBlobLF         // the LF after it
	afterLine        // the LF of a line whose CR came last
)

// replyFollower follows the replies of one connection, a byte at a time as they arrive, and says
// when one must be refused. It keeps a few counters and one small frame per open aggregate,
// never the reply itself. Not safe for concurrent use: a connection has one reader.
type replyFollower struct {
	max   int64
	cost  int64 // of the reply under way
	state int
	typ   byte // the type of the line under way
	// The line under way: its length, a number's sign and value, whether it is one (so far).
	lineLen int64
	neg     bool
	num     int64
	digits  int
	numeric bool
	blob    int64
	stack   []frame
	// pending counts the commands written and not yet answered (nil: not counted).
	pending *atomic.Int64
}

// frame is an open aggregate: how many values it still waits for, and whether it is an
// attribute (whose end is no value of its parent: the value it annotates follows).
type frame struct {
	left int64
	attr bool
}

func newReplyFollower(max int64) *replyFollower { return &replyFollower{max: max} }

func refuse(format string, args ...any) error {
	return &ReplyError{Reason: fmt.Sprintf(format, args...)}
}

// charge adds n to the reply's cost and refuses it over the cap.
func (f *replyFollower) charge(n int64) error {
	if n > f.max-f.cost {
		return refuse("longer than %d bytes", f.max)
	}
	f.cost += n
	return nil
}

// feed follows b, the next bytes of the connection; an error refuses the stream (and feed must
// not be called again).
func (f *replyFollower) feed(b []byte) error {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch f.state {
		case inBlob:
			// The payload was charged with its header: skip it at once.
			n := min(int64(len(b)-i), f.blob)
			f.blob -= n
			i += int(n) - 1
			if f.blob == 0 {
				f.state = atBlobCR
			}
			continue
		case atBlobCR, atBlobLF:
			if err := f.charge(1); err != nil {
				return err
			}
			if f.state == atBlobCR {
				if c != '\r' {
					return refuse("blob string not followed by CRLF")
				}
				f.state = atBlobLF
				continue
			}
			if c != '\n' {
				return refuse("blob string not followed by CRLF")
			}
			f.state = atType
			if err := f.valueDone(); err != nil {
				return err
			}
			continue
		}
		if err := f.charge(1); err != nil {
			return err
		}
		switch f.state {
		case atType:
			if err := f.startValue(c); err != nil {
				return err
			}
		case inLine:
			if c == '\r' {
				f.state = afterLine
				continue
			}
			if c == '\n' {
				return refuse("line ended without CR")
			}
			if err := f.lineByte(c); err != nil {
				return err
			}
		case afterLine:
			if c != '\n' {
				return refuse("CR inside a line")
			}
			f.state = atType
			if err := f.lineDone(); err != nil {
				return err
			}
		}
	}
	return nil
}

// startValue begins a value of type c.
func (f *replyFollower) startValue(c byte) error {
	switch c {
	case '+', '-', ',', '(', // simple string, error, double, big number: a line
		':', '$', '!', '=', '*', '~', '%', '|', // an integer or a length
		'_', '#': // null, boolean
	case '>':
		return refuse("push message, and the operator subscribes to nothing")
	default:
		// '.', ';' and a streamed '?' length belong to RESP3's streamed types, which Valkey never
		// sends and valkey-go reads without a bound.
		return refuse("unknown or unsupported type byte %q", c)
	}
	f.typ, f.state = c, inLine
	f.lineLen, f.neg, f.num, f.digits = 0, false, 0, 0
	switch c {
	case ':', '$', '!', '=', '*', '~', '%', '|':
		f.numeric = true
	default:
		f.numeric = false
	}
	return nil
}

// lineByte follows one byte of a line's content (its CR and LF aside).
func (f *replyFollower) lineByte(c byte) error {
	f.lineLen++
	switch {
	case f.typ == '_':
		return refuse("null with content")
	case f.typ == '#':
		if f.lineLen > 1 || (c != 't' && c != 'f') {
			return refuse("boolean other than t or f")
		}
	case f.numeric:
		switch {
		case c == '-' && f.lineLen == 1:
			f.neg = true
		case c >= '0' && c <= '9':
			d := int64(c - '0')
			if f.digits++; f.num > (math.MaxInt64-d)/10 {
				return refuse("number out of range")
			}
			f.num = f.num*10 + d
		default:
			return refuse("%q followed by %q, not a number", f.typ, c)
		}
	}
	return nil
}

// lineDone ends a line: a value, or the header of a blob or an aggregate.
func (f *replyFollower) lineDone() error {
	if f.numeric && f.digits == 0 {
		return refuse("%q without a number", f.typ)
	}
	if f.typ == '#' && f.lineLen != 1 {
		return refuse("boolean other than t or f")
	}
	n := f.num
	if f.neg {
		n = -n
	}
	switch f.typ {
	case '$', '!', '=':
		if n == -1 {
			return f.valueDone() // RESP2's null
		}
		if n < -1 {
			return refuse("blob length %d", n)
		}
		if err := f.charge(n); err != nil {
			return err
		}
		f.blob = n
		f.state = inBlob
		if n == 0 {
			f.state = atBlobCR
		}
		return nil
	case '*', '~', '%', '|':
		if n == -1 && (f.typ == '*' || f.typ == '~') {
			return f.valueDone() // RESP2's null array
		}
		if n < 0 {
			return refuse("%q length %d", f.typ, n)
		}
		if f.typ == '%' || f.typ == '|' {
			n *= 2 // keys and values
		}
		if n > (f.max-f.cost)/elementCost {
			return refuse("longer than %d bytes", f.max)
		}
		f.cost += n * elementCost
		if n == 0 {
			if f.typ == '|' {
				return nil // an empty attribute: the value it annotates follows
			}
			return f.valueDone()
		}
		if len(f.stack) >= maxReplyDepth {
			return refuse("nested deeper than %d", maxReplyDepth)
		}
		f.stack = append(f.stack, frame{left: n, attr: f.typ == '|'})
		return nil
	}
	return f.valueDone()
}

// valueDone counts a complete value: an element of the innermost open aggregate, whose end may
// complete its parent in turn, or, with none open, the end of the reply.
func (f *replyFollower) valueDone() error {
	for {
		if len(f.stack) == 0 {
			f.cost = 0
			if f.pending != nil && f.pending.Add(-1) < 0 {
				return refuse("a reply to no command")
			}
			return nil
		}
		top := &f.stack[len(f.stack)-1]
		if top.left--; top.left > 0 {
			return nil
		}
		attr := top.attr
		f.stack = f.stack[:len(f.stack)-1]
		if attr {
			return nil // the annotated value follows, as its parent's element
		}
	}
}

// guardedConn is a connection whose incoming bytes a replyFollower checks before the reader
// (valkey-go, one goroutine at a time: the handshake's, then its reader's) sees them, and whose
// outgoing commands are counted for it. A refused reply fails that Read and every later one, and
// closes the connection; the bytes of that Read are not handed on, so valkey-go never reads the
// line that declared what was refused.
type guardedConn struct {
	net.Conn
	f       *replyFollower
	err     error
	sent    commandCounter
	pending atomic.Int64
}

// guardReplies wraps c so that every reply read from it is checked (see above), each costing at
// most max.
func guardReplies(c net.Conn, max int64) net.Conn {
	g := &guardedConn{Conn: c, f: newReplyFollower(max)}
	g.f.pending = &g.pending
	return g
}

func (g *guardedConn) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if ferr := g.f.feed(p[:n]); ferr != nil {
			g.err = ferr
			_ = g.Conn.Close()
			return 0, ferr
		}
	}
	return n, err
}

// Write counts the commands in p before they leave, so that their replies, which cannot come
// sooner, find them counted. valkey-go has one writer goroutine per connection.
func (g *guardedConn) Write(p []byte) (int, error) {
	g.pending.Add(g.sent.feed(p))
	return g.Conn.Write(p)
}

// commandCounter counts the commands of a stream of them as clients write them (valkey-go's
// writeCmd): an array header `*n`, then n blob strings `$len` payload CRLF. It only needs to find
// where each command begins.
type commandCounter struct {
	state int   // cmdAt, cmdCount, cmdArgAt, cmdArgLen, cmdArgBody
	args  int64 // the blobs the command under way still has
	num   int64 // the number being read
	body  int64 // the bytes left of a blob, its CRLF included
}

const (
	cmdAt = iota
	cmdCount
	cmdArgAt
	cmdArgLen
	cmdArgBody
)

// feed follows b and returns how many commands begin in it.
func (w *commandCounter) feed(b []byte) int64 {
	var began int64
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch w.state {
		case cmdAt:
			if c == '*' {
				began++
				w.state, w.num = cmdCount, 0
			}
		case cmdCount, cmdArgLen:
			switch {
			case c >= '0' && c <= '9':
				w.num = w.num*10 + int64(c-'0')
			case c == '\n' && w.state == cmdCount:
				w.args = w.num
				w.state = cmdArgAt
				if w.args <= 0 {
					w.state = cmdAt
				}
			case c == '\n':
				w.body = w.num + 2
				w.state = cmdArgBody
			}
		case cmdArgAt:
			if c == '$' {
				w.state, w.num = cmdArgLen, 0
			}
		case cmdArgBody:
			n := min(int64(len(b)-i), w.body)
			w.body -= n
			i += int(n) - 1
			if w.body == 0 {
				w.state = cmdArgAt
				if w.args--; w.args == 0 {
					w.state = cmdAt
				}
			}
		}
	}
	return began
}
