// Package valkeytest puts scripted Valkey nodes behind the operator's Valkey seam
// (valkey.Dialer): each node speaks RESP3 over an in-memory connection, records every command
// it receives, in the order the fleet received them, and answers each with what the test
// scripted (+OK unless told otherwise). The operator's valkey.Client and valkey-go run unchanged
// above it, so a unit test sees exactly the commands a pass sends, with their arguments, as a
// valkey-server would receive them.
//
// Our own code, not a library's: valkey-go's mock package (gomock over valkeygo.Client) is not
// served by the module proxy this project builds from, and a mock of the client would stand in
// for valkey-go itself, hiding the commands as they go out on the wire.
package valkeytest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Reply is one RESP3 reply a node sends. Its writes go to a bufio.Writer, whose Flush reports
// their error.
type Reply interface {
	write(w *bufio.Writer)
}

type simple string

func (r simple) write(w *bufio.Writer) { _, _ = fmt.Fprintf(w, "+%s\r\n", string(r)) }

type errReply string

func (r errReply) write(w *bufio.Writer) { _, _ = fmt.Fprintf(w, "-%s\r\n", string(r)) }

type integer int64

func (r integer) write(w *bufio.Writer) { _, _ = fmt.Fprintf(w, ":%d\r\n", int64(r)) }

type bulk string

func (r bulk) write(w *bufio.Writer) { _, _ = fmt.Fprintf(w, "$%d\r\n%s\r\n", len(r), string(r)) }

type array []Reply

func (r array) write(w *bufio.Writer) {
	_, _ = fmt.Fprintf(w, "*%d\r\n", len(r))
	for _, e := range r {
		e.write(w)
	}
}

type mapReply []Reply // key, value, key, value...

func (r mapReply) write(w *bufio.Writer) {
	_, _ = fmt.Fprintf(w, "%%%d\r\n", len(r)/2)
	for _, e := range r {
		e.write(w)
	}
}

type raw string

func (r raw) write(w *bufio.Writer) { _, _ = w.WriteString(string(r)) }

// OK is +OK.
func OK() Reply { return simple("OK") }

// Raw is bytes sent as they are, RESP or not: a node that answers what no Valkey would (a
// length below -1, a reply cut short), for tests of what the client refuses to read.
func Raw(s string) Reply { return raw(s) }

// Err is an error reply; msg starts with its code ("ERR ...", "NOREPLICAS ...").
func Err(msg string) Reply { return errReply(msg) }

// Int is an integer reply.
func Int(n int64) Reply { return integer(n) }

// Str is a bulk string reply (INFO, CLUSTER NODES, CLUSTER MYID).
func Str(s string) Reply { return bulk(s) }

// Strs is an array of bulk strings (ACL LIST, CLUSTER GETKEYSINSLOT).
func Strs(s ...string) Reply {
	out := make(array, len(s))
	for i, e := range s {
		out[i] = bulk(e)
	}
	return out
}

// Array is an array of replies.
func Array(r ...Reply) Reply { return array(r) }

// Map is a map of bulk strings, given as key, value, key, value... (CONFIG GET).
func Map(kv ...string) Reply {
	out := make(mapReply, len(kv))
	for i, e := range kv {
		out[i] = bulk(e)
	}
	return out
}

// Call is one command a node received. User is the user its connection authenticated as in
// valkey-go's handshake (HELLO 3 AUTH user ...; "default" without AUTH); the password is not
// kept.
type Call struct {
	Addr string
	User string
	Args []string
}

// String is the node's address and the command as typed: "10.0.0.1:6379 CLUSTER FAILOVER".
func (c Call) String() string { return c.Addr + " " + strings.Join(c.Args, " ") }

// Fleet is a set of scripted nodes by address, and the log of every command they received.
// The zero value is not ready: use New.
type Fleet struct {
	mu    sync.Mutex
	nodes map[string]*Node
	calls []Call
	// quiet stops keeping calls (Quiet); received counts them all the same.
	quiet    bool
	received atomic.Int64
}

// New returns a fleet with no node.
func New() *Fleet { return &Fleet{nodes: map[string]*Node{}} }

// Node returns the node at addr, adding one that answers +OK to everything when there is none.
func (f *Fleet) Node(addr string) *Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[addr]
	if !ok {
		n = &Node{addr: addr, fleet: f}
		f.nodes[addr] = n
	}
	return n
}

// Dial is the fleet's valkey.Dialer: a connection to the node at addr, or the error a dial to
// an address nobody listens on gets. With tlsConf, the connection is TLS, its handshake done
// (as tls.Dialer leaves it), with the certificate the node serves (ServeTLS).
func (f *Fleet) Dial(ctx context.Context, addr string, tlsConf *tls.Config) (net.Conn, error) {
	f.mu.Lock()
	n, ok := f.nodes[addr]
	f.mu.Unlock()
	if !ok || n.isDown() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	client, server := net.Pipe()
	n.track(server)
	go n.serve(server, tlsConf != nil)
	if tlsConf == nil {
		return client, nil
	}
	tc := tls.Client(client, tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	return tc, nil
}

// Serve answers every connection that l accepts as the node whose address the client dialled
// (the connection's local address), until l is closed, and returns Accept's error then
// (net.ErrClosed after a Close). A connection to an address with no node, or to a node that is
// Down, is closed at once. A listener on the wildcard address ("0.0.0.0:6379") so serves a whole
// fleet of nodes on loopback addresses (127.10.0.1:6379, 127.10.0.2:6379, …: Linux routes
// all of 127.0.0.0/8 to the loopback device) with one file descriptor, where a listener per
// node (Node.Serve) would take thousands.
func (f *Fleet) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		f.mu.Lock()
		n, ok := f.nodes[c.LocalAddr().String()]
		f.mu.Unlock()
		if !ok {
			_ = c.Close()
			continue
		}
		n.accept(c)
	}
}

// Calls returns every command the fleet's nodes received, in the order they received them,
// without those valkey-go sends on its own (upkeep).
func (f *Fleet) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Commands is Calls as strings (Call.String).
func (f *Fleet) Commands() []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.String())
	}
	return out
}

// Quiet stops the fleet keeping the calls it receives (Calls then returns only those received
// before): a fleet of thousands of nodes serving for minutes would otherwise hold every command
// in memory. Received still counts them.
func (f *Fleet) Quiet() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.quiet = true
}

// Received is how many commands the fleet's nodes have received, without those valkey-go sends
// on its own (upkeep), kept or not.
func (f *Fleet) Received() int64 { return f.received.Load() }

// Reset forgets the calls received so far.
func (f *Fleet) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func (f *Fleet) record(c Call) {
	f.received.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.quiet {
		f.calls = append(f.calls, c)
	}
}

// Node is one scripted node. Safe for concurrent use.
type Node struct {
	addr  string
	fleet *Fleet
	mu    sync.Mutex
	rules []rule
	down  bool
	conns []net.Conn
	cert  *tls.Certificate
}

// ServeTLS sets the certificate the node serves to TLS connections from now on (nil: it
// speaks no TLS, and a TLS handshake with it fails).
func (n *Node) ServeTLS(cert *tls.Certificate) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cert = cert
}

func (n *Node) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cert == nil {
		return nil, errors.New("valkeytest: the node serves no TLS")
	}
	return n.cert, nil
}

type rule struct {
	prefix []string
	reply  func(args []string) Reply
}

// Addr is the node's address.
func (n *Node) Addr() string { return n.addr }

// On makes the node answer r to every command that starts with cmd (words separated by
// spaces, any case: "CLUSTER FAILOVER", "INFO"). A later rule wins over an earlier one.
func (n *Node) On(cmd string, r Reply) *Node {
	return n.OnFunc(cmd, func([]string) Reply { return r })
}

// OnFunc is On with a reply computed from the command's arguments (all of them, the command's
// own words included).
func (n *Node) OnFunc(cmd string, reply func(args []string) Reply) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rules = append(n.rules, rule{prefix: strings.Fields(strings.ToUpper(cmd)), reply: reply})
	return n
}

// Down stops the node answering: its open connections are closed and new dials refused, as
// for a process that exited. Down(false) lets it be dialled again.
func (n *Node) Down(down bool) {
	n.mu.Lock()
	n.down = down
	conns := n.conns
	if down {
		n.conns = nil
	}
	n.mu.Unlock()
	if down {
		for _, c := range conns {
			_ = c.Close()
		}
	}
}

func (n *Node) isDown() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down
}

func (n *Node) track(c net.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.conns = append(n.conns, c)
}

// untrack forgets c once it is closed, so that a node serving for long, its clients coming and
// going, does not hold every connection it ever had.
func (n *Node) untrack(c net.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i := slices.Index(n.conns, c); i >= 0 {
		n.conns = slices.Delete(n.conns, i, i+1)
	}
}

// Serve answers as n every connection that l accepts, until l is closed, and returns Accept's
// error then (net.ErrClosed after a Close). A connection is TLS when the node serves a
// certificate (ServeTLS), as a Valkey whose port is tls-port. While n is Down an accepted
// connection is closed at once: to its client, a node that went away.
//
// Through Serve a node is a real TCP endpoint that another process can dial: the operator's
// binary, unchanged, against a fleet the test simulates (one listener per node, each on its own
// address, so the node's address is what the operator dials).
func (n *Node) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		n.accept(c)
	}
}

// accept serves c, a connection a listener accepted for n, or closes it while n is Down.
func (n *Node) accept(c net.Conn) {
	n.mu.Lock()
	down, overTLS := n.down, n.cert != nil
	n.mu.Unlock()
	if down {
		_ = c.Close()
		return
	}
	n.track(c)
	go n.serve(c, overTLS)
}

// answer is the reply to args: the newest matching rule's, else the defaults of a node that
// takes every command.
func (n *Node) answer(args []string) Reply {
	n.mu.Lock()
	rules := slices.Clone(n.rules)
	n.mu.Unlock()
	for i := len(rules) - 1; i >= 0; i-- {
		if matches(rules[i].prefix, args) {
			return rules[i].reply(args)
		}
	}
	switch strings.ToUpper(args[0]) {
	case "HELLO":
		// proto an integer: valkey-go falls back to RESP2 otherwise.
		return mapReply{bulk("server"), bulk("valkey"), bulk("version"), bulk("8.0.1"), bulk("proto"), integer(3), bulk("mode"), bulk("cluster")}
	case "PING":
		return simple("PONG")
	}
	return OK()
}

func matches(prefix, args []string) bool {
	if len(args) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if strings.ToUpper(args[i]) != p {
			return false
		}
	}
	return true
}

// upkeep reports whether args is one of the commands valkey-go sends on its own to keep a
// connection: the handshake of every new connection (HELLO, CLIENT SETINFO) and the PING it
// sends to check a quiet connection or to drain one it closes. The operator's own PING
// (valkey.Client.Ping) is left out with them.
func upkeep(args []string) bool {
	return matches([]string{"HELLO"}, args) || matches([]string{"CLIENT", "SETINFO"}, args) || matches([]string{"PING"}, args)
}

// serve answers the commands of one connection until it closes, over TLS when asked to.
func (n *Node) serve(c net.Conn, overTLS bool) {
	raw := c
	defer func() {
		_ = c.Close()
		n.untrack(raw)
	}()
	if overTLS {
		c = tls.Server(c, &tls.Config{GetCertificate: n.certificate, MinVersion: tls.VersionTLS12})
	}
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	user := "default"
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		if matches([]string{"HELLO"}, args) {
			if i := slices.IndexFunc(args, func(a string) bool { return strings.EqualFold(a, "AUTH") }); i >= 0 && i+1 < len(args) {
				user = args[i+1]
			}
		}
		if !upkeep(args) {
			n.fleet.record(Call{Addr: n.addr, User: user, Args: args})
		}
		n.answer(args).write(w)
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// readCommand reads one command as clients send it: an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[0] != '*' {
		return nil, fmt.Errorf("valkeytest: want an array, got %q", line)
	}
	count, err := strconv.Atoi(line[1:])
	if err != nil || count < 1 {
		return nil, fmt.Errorf("valkeytest: bad array header %q", line)
	}
	args := make([]string, count)
	for i := range args {
		h, err := readLine(r)
		if err != nil {
			return nil, err
		}
		if len(h) < 2 || h[0] != '$' {
			return nil, fmt.Errorf("valkeytest: want a bulk string, got %q", h)
		}
		size, err := strconv.Atoi(h[1:])
		if err != nil || size < 0 {
			return nil, fmt.Errorf("valkeytest: bad bulk header %q", h)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\r\n"), nil
}

// Simulate makes n behave as a cluster-enabled Valkey 8.0.1 node of its own with node id id,
// announcing ip: a primary that knows no other node, serves the slots CLUSTER ADDSLOTSRANGE
// gives it, and reports them in CLUSTER NODES, CLUSTER INFO and CLUSTER MYID; INFO and CONFIG
// GET answer as a node started with Valkey's defaults does; ACL LIST shows the users ACL
// SETUSER set (rules as sent, after a leading reset) beside the default user, ACL USERS their
// names, and ACL DELUSER removes them, so the ACL controller's passes settle as on a real 8.x
// node. Enough for a 1×0 cluster's passes (formation, the steady state) to run against it;
// rules added afterwards still win.
func Simulate(n *Node, id, ip string) *Node {
	var mu sync.Mutex
	var slots [][2]int
	config := map[string]string{}
	users := map[string][]string{"default": strings.Fields(defaultUser)}
	n.OnFunc("ACL LIST", func([]string) Reply {
		mu.Lock()
		defer mu.Unlock()
		var lines []string
		for name, rules := range users {
			lines = append(lines, strings.Join(append([]string{"user", name}, rules...), " "))
		}
		slices.Sort(lines)
		return Strs(lines...)
	})
	n.OnFunc("ACL USERS", func([]string) Reply {
		mu.Lock()
		defer mu.Unlock()
		var names []string
		for name := range users {
			names = append(names, name)
		}
		slices.Sort(names)
		return Strs(names...)
	})
	n.OnFunc("ACL SETUSER", func(args []string) Reply {
		if len(args) < 3 {
			return Err("ERR wrong number of arguments for 'acl|setuser' command")
		}
		mu.Lock()
		defer mu.Unlock()
		name, rules := args[2], args[3:]
		if len(rules) > 0 && strings.EqualFold(rules[0], "reset") {
			users[name] = slices.Clone(rules[1:])
		} else {
			users[name] = append(users[name], rules...)
		}
		return OK()
	})
	n.OnFunc("ACL DELUSER", func(args []string) Reply {
		mu.Lock()
		defer mu.Unlock()
		deleted := 0
		for _, name := range args[2:] {
			if _, ok := users[name]; ok && name != "default" {
				delete(users, name)
				deleted++
			}
		}
		return Int(int64(deleted))
	})
	served := func() int {
		total := 0
		for _, r := range slots {
			total += r[1] - r[0] + 1
		}
		return total
	}
	n.OnFunc("CLUSTER NODES", func([]string) Reply {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%s %s:6379@16379 myself,master - 0 0 1 connected", id, ip)
		for _, r := range slots {
			if r[0] == r[1] {
				line += fmt.Sprintf(" %d", r[0])
			} else {
				line += fmt.Sprintf(" %d-%d", r[0], r[1])
			}
		}
		return Str(line + "\n")
	})
	n.OnFunc("CLUSTER INFO", func([]string) Reply {
		mu.Lock()
		defer mu.Unlock()
		state := "fail"
		if served() == 16384 {
			state = "ok"
		}
		return Str(fmt.Sprintf("cluster_enabled:1\r\ncluster_state:%s\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\ncluster_known_nodes:1\r\ncluster_size:%d\r\ncluster_current_epoch:1\r\ncluster_my_epoch:1\r\n",
			state, served(), served(), min(1, served())))
	})
	n.On("CLUSTER MYID", Str(id))
	n.On("INFO", Str("# Server\r\nvalkey_version:8.0.1\r\nredis_version:7.2.4\r\nprocess_id:1\r\n"+
		"# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n"+
		"# Memory\r\nused_memory:1000000\r\nmaxmemory:0\r\n# Clients\r\nconnected_clients:1\r\n# Stats\r\ntotal_commands_processed:1\r\n"))
	n.OnFunc("CONFIG SET", func(args []string) Reply {
		mu.Lock()
		defer mu.Unlock()
		for i := 2; i+1 < len(args); i += 2 {
			config[strings.ToLower(args[i])] = args[i+1]
		}
		return OK()
	})
	n.OnFunc("CONFIG GET", func(args []string) Reply {
		mu.Lock()
		defer mu.Unlock()
		var kv []string
		for _, k := range args[2:] {
			v, ok := config[strings.ToLower(k)]
			if !ok {
				v = defaults[strings.ToLower(k)]
			}
			kv = append(kv, k, v)
		}
		return Map(kv...)
	})
	n.OnFunc("CLUSTER ADDSLOTSRANGE", func(args []string) Reply {
		mu.Lock()
		defer mu.Unlock()
		for i := 2; i+1 < len(args); i += 2 {
			a, errA := strconv.Atoi(args[i])
			b, errB := strconv.Atoi(args[i+1])
			if errA != nil || errB != nil || a > b {
				return Err("ERR Invalid or out of range slot")
			}
			slots = append(slots, [2]int{a, b})
		}
		return OK()
	})
	return n
}

// defaultUser is the default user's rules as ACL LIST prints them on a node started without
// an ACL file (valkey-server 8.0.1).
const defaultUser = "on nopass sanitize-payload ~* &* +@all"

// defaults are what CONFIG GET prints for the live settings of a node started with Valkey
// 8.0.1's defaults (measured on valkey-server 8.0.1).
var defaults = map[string]string{
	"maxmemory": "0", "maxmemory-policy": "noeviction", "maxmemory-samples": "5", "hz": "10",
	"timeout": "0", "maxclients": "10000", "slowlog-log-slower-than": "10000", "slowlog-max-len": "128",
	"latency-monitor-threshold": "0", "lazyfree-lazy-eviction": "yes", "lazyfree-lazy-expire": "yes",
}
