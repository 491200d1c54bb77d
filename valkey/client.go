package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// Timeouts for talking to one node. They are short on purpose: the
// operator observes every node on every pass, and a node that takes longer
// than this to answer CLUSTER NODES is one to mark unreachable, not to wait
// for. A caller's context deadline, when earlier, wins.
const (
	// DialTimeout bounds connecting and authenticating (HELLO with AUTH).
	DialTimeout = 2 * time.Second
	// CommandTimeout bounds each command, including its reply.
	CommandTimeout = 5 * time.Second
	// IdleCheck is how long a connection may stay silent before valkey-go checks it with a PING
	// of its own (and the kernel starts TCP keepalive probes). It is not how a dead node is
	// found: every command the operator sends has its own deadline (CommandTimeout, the pool's
	// ObserveTimeout), and a pool drops a client whose command failed. valkey-go's default, 1 s,
	// sent most of the operator's Valkey traffic at fleet scale: every node has a connection in
	// the cluster controller's pool, looked at every 4–5 s, and one in the ACL controller's,
	// used once a tick, so about 30 PINGs per node per 30 s tick, and 13–20 % of the operator's
	// CPU samples in the Fleet benchmark's profiles. Above the look period, the cluster pool's
	// connections are never idle long enough to be pinged.
	IdleCheck = 10 * time.Second
)

// clientName is what CLIENT LIST on a node shows for the operator.
const clientName = "valkey-operator"

// Credentials are what the operator authenticates with. An empty Username
// with an empty Password sends no AUTH at all (a node whose default user
// has no password); an empty Username with a Password authenticates the
// default user. TLS, when set, is used for the connection; ServerName, when
// set, names the node at an address, and the node's certificate is verified
// under that name (a node is dialled at its IP, but its certificate names its
// DNS name).
type Credentials struct {
	Username   string
	Password   string
	TLS        *tls.Config
	ServerName func(addr string) string
}

// tlsFor is the TLS configuration for the node at addr: TLS with the node's
// server name, nil without TLS.
func (c Credentials) tlsFor(addr string) *tls.Config {
	if c.TLS == nil {
		return nil
	}
	cfg := c.TLS.Clone()
	if name := c.serverName(addr); name != "" {
		cfg.ServerName = name
	}
	return cfg
}

func (c Credentials) serverName(addr string) string {
	if c.ServerName == nil {
		return ""
	}
	return c.ServerName(addr)
}

// String prints the credentials without the password, so that a stray
// %v in a log line cannot leak it.
func (c Credentials) String() string {
	pw := "none"
	if c.Password != "" {
		pw = "[redacted]"
	}
	return fmt.Sprintf("{Username:%q Password:%s TLS:%t}", c.Username, pw, c.TLS != nil)
}

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// Client talks to exactly one Valkey node. It never follows MOVED or ASK
// and never routes by slot: every method runs on the node named at
// NewClient, which is what cluster administration needs (CLUSTER MEET,
// REPLICATE and FAILOVER mean "this node"). Safe for concurrent use.
type Client struct {
	addr     string
	username string
	password string
	c        valkeygo.Client
}

// NewClient connects to the node at addr ("ip:port") and authenticates:
// valkey-go sends HELLO 3 AUTH user password SETNAME valkey-operator, then
// CLIENT SETINFO (whose failure it ignores). It fails when the node cannot
// be reached within DialTimeout or refuses the credentials; the error
// names the address, never the password.
//
// valkey-go would otherwise probe the node with CLUSTER SLOTS and build a
// cluster client routing by slot; ForceSingleClient keeps one plain
// connection to this node even when it runs with cluster-enabled yes.
// Client-side caching (CLIENT TRACKING) is off: the operator reads
// topology, which must never come from a cache. Retries are off: a failed
// command surfaces at once and the next reconcile tries again.
func NewClient(addr string, creds Credentials) (*Client, error) {
	return Dialer(nil).NewClient(addr, creds)
}

// Dialer opens the connection to the node at addr, with TLS when tlsConf is not nil: the one seam
// between the operator and the nodes it runs. nil, the production value, dials TCP within
// DialTimeout. A unit test or a simulated fleet passes one that reaches an in-memory node
// (package valkeytest) instead; everything above the connection (valkey-go, the handshake, each
// method of Client) runs unchanged, so what such a node receives is exactly what a valkey-server
// would.
type Dialer func(ctx context.Context, addr string, tlsConf *tls.Config) (net.Conn, error)

// NewClient is the package's NewClient over the connections d opens.
func (d Dialer) NewClient(addr string, creds Credentials) (*Client, error) {
	return newClient(d, addr, creds, MaxReply, nil)
}

// NewLimitedClient is NewClient for a caller that knows its replies are smaller than MaxReply:
// each one costing more than maxReply (reply.go) is refused and ends the connection.
func (d Dialer) NewLimitedClient(addr string, creds Credentials, maxReply int64) (*Client, error) {
	return newClient(d, addr, creds, maxReply, nil)
}

// NewPooledClient is NewClient for many concurrent commands that may block on the server: each
// command in flight gets a connection of its own (up to size, dialled as needed), where
// NewClient pipelines every command on one connection. Valkey serves a connection's commands in
// order, so one command that waits (CLUSTER SETSLOT on a primary with replicas waits for them to
// acknowledge it, since Valkey 8.0) holds up every command behind it on that connection; on
// separate connections the waits overlap. The slot mover uses it for the length of a batch.
func NewPooledClient(addr string, creds Credentials, size int) (*Client, error) {
	return Dialer(nil).NewPooledClient(addr, creds, size)
}

// NewPooledClient is the package's NewPooledClient over the connections d opens.
func (d Dialer) NewPooledClient(addr string, creds Credentials, size int) (*Client, error) {
	return newClient(d, addr, creds, MaxReply, func(o *valkeygo.ClientOption) {
		o.DisableAutoPipelining = true
		o.BlockingPoolSize = size
	})
}

func newClient(dial Dialer, addr string, creds Credentials, maxReply int64, tune func(*valkeygo.ClientOption)) (*Client, error) {
	opt := valkeygo.ClientOption{
		InitAddress:       []string{addr},
		Username:          creds.Username,
		Password:          creds.Password,
		TLSConfig:         creds.tlsFor(addr),
		ClientName:        clientName,
		ForceSingleClient: true,
		DisableCache:      true,
		// The operator's commands are few and small, and its pools keep a client per node
		// across passes, so what a connection holds is paid per node of the fleet: valkey-go's
		// defaults (0.5 MiB buffers each way, a 1024-entry ring) cost about 1 MiB a node. The
		// buffers only bound how much one read or write system call moves: a reply longer than
		// the read buffer (CLUSTER NODES of a large cluster, INFO) is read by its length straight
		// into its own slice, a longer command (MIGRATE of a key batch) is written past the
		// buffer. The ring bounds the commands in flight on one connection before the next caller
		// waits; an observation pipelines four, the other controllers send one at a time. At
		// 64 KiB each way and 256 entries the connections were 80 % of the operator's heap at 100
		// clusters (45 of 50 MB), and at 16/8 KiB and 32 entries still 48 % at 1 000 simulated
		// (61 of 127 MB; the Fleet and SimulatedFleet benchmarks' heap profiles).
		ReadBufferEachConn:  4 << 10,
		WriteBufferEachConn: 4 << 10,
		RingScaleEachConn:   4,
		DisableRetry:        true,
		Dialer:              net.Dialer{Timeout: DialTimeout, KeepAlive: IdleCheck},
		ConnWriteTimeout:    CommandTimeout,
	}
	// Every connection, dialled by the seam or over TCP as valkey-go would, has its replies
	// checked before valkey-go reads them (reply.go).
	opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, tlsConf *tls.Config) (net.Conn, error) {
		var conn net.Conn
		var err error
		switch {
		case dial != nil:
			conn, err = dial(ctx, addr, tlsConf)
		case tlsConf != nil:
			conn, err = (&tls.Dialer{NetDialer: d, Config: tlsConf}).DialContext(ctx, "tcp", addr)
		default:
			conn, err = d.DialContext(ctx, "tcp", addr)
		}
		if err != nil {
			return nil, err
		}
		return guardReplies(conn, maxReply), nil
	}
	if tune != nil {
		tune(&opt)
	}
	c, err := valkeygo.NewClient(opt)
	if err != nil {
		// With ForceSingleClient valkey-go returns a client even when
		// the first dial fails, and would keep redialling in the
		// background; the caller gets an error, so nothing may linger.
		if c != nil {
			c.Close()
		}
		return nil, redact(fmt.Errorf("connect %s: %w", addr, err), creds.Password)
	}
	return &Client{addr: addr, username: creds.Username, password: creds.Password, c: c}, nil
}

// Addr returns the address the client talks to.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection. The client must not be used afterwards.
func (c *Client) Close() { c.c.Close() }

// do runs one command under CommandTimeout.
func (c *Client) do(ctx context.Context, cmd valkeygo.Completed) valkeygo.ValkeyResult {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	return c.c.Do(ctx, cmd)
}

// wrap adds op, a short lower-case name of the command, and the node's
// address to err, and scrubs the password from the result.
func (c *Client) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return redact(fmt.Errorf("%s on %s: %w", op, c.addr, err), c.password)
}

// doOK runs a command whose reply is a plain OK (or anything else that is
// not an error).
func (c *Client) doOK(ctx context.Context, op string, cmd valkeygo.Completed) error {
	return c.wrap(op, c.do(ctx, cmd).Error())
}

// doString runs a command that replies with text. In RESP3, INFO and
// CLUSTER NODES reply with a verbatim string whose "txt:" format prefix
// valkey-go leaves in place; it is removed here.
func (c *Client) doString(ctx context.Context, op string, cmd valkeygo.Completed) (string, error) {
	return c.stringOf(op, c.do(ctx, cmd))
}

// doMulti runs cmds as one pipeline under CommandTimeout: one reply per command, in order.
func (c *Client) doMulti(ctx context.Context, cmds ...valkeygo.Completed) []valkeygo.ValkeyResult {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	return c.c.DoMulti(ctx, cmds...)
}

// stringOf is doString's reading of a reply already received.
func (c *Client) stringOf(op string, r valkeygo.ValkeyResult) (string, error) {
	s, err := r.ToString()
	if err != nil {
		return "", c.wrap(op, err)
	}
	return strings.TrimPrefix(s, "txt:"), nil
}

// Ping sends PING.
func (c *Client) Ping(ctx context.Context) error {
	return c.doOK(ctx, "ping", c.c.B().Ping().Build())
}

// ClusterNodes sends CLUSTER NODES and parses the reply with
// ParseClusterNodes.
func (c *Client) ClusterNodes(ctx context.Context) ([]NodeEntry, error) {
	text, err := c.doString(ctx, "cluster nodes", c.c.B().ClusterNodes().Build())
	if err != nil {
		return nil, err
	}
	entries, err := ParseClusterNodes(text)
	if err != nil {
		return nil, c.wrap("cluster nodes", err)
	}
	return entries, nil
}

// ClusterInfo sends CLUSTER INFO and parses the reply with ParseInfo
// (cluster_state, cluster_slots_assigned, cluster_known_nodes, ...).
func (c *Client) ClusterInfo(ctx context.Context) (map[string]string, error) {
	text, err := c.doString(ctx, "cluster info", c.c.B().ClusterInfo().Build())
	if err != nil {
		return nil, err
	}
	return ParseInfo(text), nil
}

// Info sends INFO with the given sections ("replication", "server", ...; several in one
// command, as Valkey 7 and later take them), or plain INFO when none is given (or only ""), and
// parses the reply with ParseInfo: one map over every section asked.
func (c *Client) Info(ctx context.Context, sections ...string) (map[string]string, error) {
	sections = slices.DeleteFunc(slices.Clone(sections), func(s string) bool { return s == "" })
	cmd := c.c.B().Info().Build()
	op := "info"
	if len(sections) > 0 {
		cmd = c.c.B().Info().Section(sections...).Build()
		op = "info " + strings.Join(sections, " ")
	}
	text, err := c.doString(ctx, op, cmd)
	if err != nil {
		return nil, err
	}
	return ParseInfo(text), nil
}

// MyID sends CLUSTER MYID and returns the node's 40-hex id.
func (c *Client) MyID(ctx context.Context) (string, error) {
	id, err := c.doString(ctx, "cluster myid", c.c.B().ClusterMyid().Build())
	if err != nil {
		return "", err
	}
	if _, err := parseNodeID(id); err != nil {
		return "", c.wrap("cluster myid", err)
	}
	return id, nil
}

// Meet sends CLUSTER MEET ip port [bus-port], asking this node to
// handshake with the node at ip:port. A busPort of 0 leaves it out, and
// Valkey then assumes port+10000. MEET is harmless to repeat: meeting a
// known node is a no-op.
func (c *Client) Meet(ctx context.Context, ip string, port, busPort int) error {
	op := fmt.Sprintf("cluster meet %s", joinHostPort(ip, port))
	meet := c.c.B().ClusterMeet().Ip(ip).Port(int64(port))
	if busPort == 0 {
		return c.doOK(ctx, op, meet.Build())
	}
	return c.doOK(ctx, op, meet.ClusterBusPort(int64(busPort)).Build())
}

// AddSlotsRange sends CLUSTER ADDSLOTSRANGE with every range of ranges,
// normalised, in one command: Valkey applies all or none. An empty set
// sends nothing.
func (c *Client) AddSlotsRange(ctx context.Context, ranges SlotRanges) error {
	for _, r := range ranges {
		if !r.Valid() {
			return c.wrap("cluster addslotsrange", fmt.Errorf("invalid slot range %d-%d", r.Start, r.End))
		}
	}
	ranges = ranges.Normalize()
	if len(ranges) == 0 {
		return nil
	}
	cmd := c.c.B().ClusterAddslotsrange().StartSlotEndSlot()
	for _, r := range ranges {
		cmd = cmd.StartSlotEndSlot(int64(r.Start), int64(r.End))
	}
	return c.doOK(ctx, "cluster addslotsrange "+ranges.String(), cmd.Build())
}

// Replicate sends CLUSTER REPLICATE primaryID, making this node a replica
// of that primary. Valkey refuses it on a node that still serves slots or
// holds keys, and when this node does not know primaryID yet (MEET first
// and wait for the handshake).
func (c *Client) Replicate(ctx context.Context, primaryID string) error {
	return c.doOK(ctx, "cluster replicate "+primaryID, c.c.B().ClusterReplicate().NodeId(primaryID).Build())
}

// BumpEpoch sends CLUSTER BUMPEPOCH and returns the node's config epoch after it, and whether
// Valkey raised it (BUMPED) or left it (STILL: it was the largest the node knows already).
func (c *Client) BumpEpoch(ctx context.Context) (uint64, bool, error) {
	reply, err := c.doString(ctx, "cluster bumpepoch", c.c.B().ClusterBumpepoch().Build())
	if err != nil {
		return 0, false, err
	}
	word, num, _ := strings.Cut(reply, " ")
	e, perr := strconv.ParseUint(num, 10, 64)
	if (word != "BUMPED" && word != "STILL") || perr != nil {
		return 0, false, fmt.Errorf("cluster bumpepoch on %s: unexpected reply %q", c.addr, reply)
	}
	return e, word == "BUMPED", nil
}

// CurrentEpoch returns cluster_current_epoch from CLUSTER INFO.
func (c *Client) CurrentEpoch(ctx context.Context) (uint64, error) {
	info, err := c.ClusterInfo(ctx)
	if err != nil {
		return 0, err
	}
	e, err := strconv.ParseUint(info["cluster_current_epoch"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster info on %s: cluster_current_epoch: %w", c.addr, err)
	}
	return e, nil
}

// FailoverMode is the option of CLUSTER FAILOVER.
type FailoverMode string

const (
	// FailoverCoordinated is plain CLUSTER FAILOVER: the replica and its
	// primary agree and no acknowledged write is lost. For rolling
	// upgrades.
	FailoverCoordinated FailoverMode = ""
	// FailoverForce is CLUSTER FAILOVER FORCE: no handshake with the
	// primary (it is down), but a vote of the other primaries.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover is CLUSTER FAILOVER TAKEOVER: no handshake and no
	// vote. For a cluster that has lost the majority of its primaries;
	// writes the old primary acknowledged but did not replicate are lost.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Failover sends CLUSTER FAILOVER [FORCE|TAKEOVER] to this node, which
// must be a replica. The reply only says the request was accepted; the
// promotion happens afterwards and has to be observed.
func (c *Client) Failover(ctx context.Context, mode FailoverMode) error {
	b := c.c.B().ClusterFailover()
	switch mode {
	case FailoverCoordinated:
		return c.doOK(ctx, "cluster failover", b.Build())
	case FailoverForce:
		return c.doOK(ctx, "cluster failover force", b.Force().Build())
	case FailoverTakeover:
		return c.doOK(ctx, "cluster failover takeover", b.Takeover().Build())
	default:
		return fmt.Errorf("cluster failover on %s: unknown mode %q", c.addr, string(mode))
	}
}

// Forget sends CLUSTER FORGET id. It only affects this node, for 60
// seconds: to drop a node for good it must be forgotten on every node
// within that time, or gossip brings it back.
func (c *Client) Forget(ctx context.Context, id string) error {
	return c.doOK(ctx, "cluster forget "+id, c.c.B().ClusterForget().NodeId(id).Build())
}

// CountKeysInSlot sends CLUSTER COUNTKEYSINSLOT slot. Only the node serving
// the slot holds its keys; elsewhere the count is 0.
func (c *Client) CountKeysInSlot(ctx context.Context, slot int) (int64, error) {
	op := fmt.Sprintf("cluster countkeysinslot %d", slot)
	n, err := c.do(ctx, c.c.B().ClusterCountkeysinslot().Slot(int64(slot)).Build()).AsInt64()
	return n, c.wrap(op, err)
}

// ACLLoad sends ACL LOAD, making the node reload its aclfile. Valkey
// loads all of it or none: on error the node keeps its previous users.
func (c *Client) ACLLoad(ctx context.Context) error {
	return c.doOK(ctx, "acl load", c.c.B().AclLoad().Build())
}

// ACLList sends ACL LIST: one line per user, as the node enforces the rules now (normalised by
// Valkey, password hashes included). The error never carries a reply line.
func (c *Client) ACLList(ctx context.Context) ([]string, error) {
	lines, err := c.do(ctx, c.c.B().AclList().Build()).AsStrSlice()
	return lines, c.wrap("acl list", err)
}

// maxPasswords bounds the password hashes of one user the operator reads back (ACLPasswords):
// a system user accepts at most two at a time, and anyone who adds more by hand has its user
// put back by the ACL controller.
const maxPasswords = 64

// ACLPasswords sends ACL GETUSER name and returns the password hashes the user accepts ("#"
// and the SHA-256 in hex, as an ACL file writes them); nil for a user the node does not have.
// The error never carries a hash.
func (c *Client) ACLPasswords(ctx context.Context, name string) ([]string, error) {
	res := c.do(ctx, c.c.B().AclGetuser().Username(name).Build())
	if valkeygo.IsValkeyNil(res.Error()) {
		return nil, nil
	}
	m, err := res.AsMap()
	if err != nil {
		return nil, c.wrap("acl getuser "+name, err)
	}
	pws, ok := m["passwords"]
	if !ok {
		return nil, fmt.Errorf("acl getuser %s: no passwords in the reply", name)
	}
	list, err := pws.AsStrSlice()
	if err != nil {
		return nil, c.wrap("acl getuser "+name, err)
	}
	if len(list) > maxPasswords {
		return nil, fmt.Errorf("acl getuser %s: %d passwords, more than %d", name, len(list), maxPasswords)
	}
	out := make([]string, len(list))
	for i, h := range list {
		out[i] = "#" + h
	}
	return out, nil
}

// maxCategories bounds the reply of ACL CAT the operator reads: Valkey 8 and 9 know 21
// categories, a module adds a few.
const maxCategories = 1024

// ACLCategories sends ACL CAT: the categories the node knows, Valkey's own and those of the
// modules it loaded, in lowercase. A reply longer than maxCategories is an error.
func (c *Client) ACLCategories(ctx context.Context) ([]string, error) {
	r := c.do(ctx, c.c.B().AclCat().Build())
	if msgs, err := r.ToArray(); err == nil && len(msgs) > maxCategories {
		return nil, c.wrap("acl cat", fmt.Errorf("%d categories, more than %d", len(msgs), maxCategories))
	}
	cats, err := r.AsStrSlice()
	if err != nil {
		return nil, c.wrap("acl cat", err)
	}
	for i := range cats {
		cats[i] = strings.ToLower(cats[i])
	}
	return cats, nil
}

// commandBatch is how many COMMAND LIST a KnownCommands pipeline sends at once.
const commandBatch = 64

// KnownCommands reports which of names (a command such as get, or a subcommand such as
// cluster|info, as an ACL rule names them) the node knows: one COMMAND LIST FILTERBY PATTERN per
// name, pipelined. A name must hold only letters, digits, '-', '_' and one '|' (ValkeyRole's
// admission rule), none of them a glob character, so it matches at most itself: each reply is
// at most one name, and Valkey compares without case. A name of another shape is an error,
// never sent.
func (c *Client) KnownCommands(ctx context.Context, names []string) (map[string]bool, error) {
	out := make(map[string]bool, len(names))
	for start := 0; start < len(names); start += commandBatch {
		batch := names[start:min(start+commandBatch, len(names))]
		cmds := make([]valkeygo.Completed, 0, len(batch))
		for _, n := range batch {
			if !commandName.MatchString(n) {
				return nil, fmt.Errorf("command list: %q is not a command name", n)
			}
			cmds = append(cmds, c.c.B().CommandList().FilterbyPatternPattern(n).Build())
		}
		for i, r := range c.doMulti(ctx, cmds...) {
			got, err := r.AsStrSlice()
			if err != nil {
				return nil, c.wrap("command list", err)
			}
			if len(got) > 1 {
				return nil, c.wrap("command list", fmt.Errorf("%d commands match %q", len(got), batch[i]))
			}
			out[batch[i]] = len(got) == 1 && strings.EqualFold(got[0], batch[i])
		}
	}
	return out, nil
}

// commandName is a command or command|subcommand as a ValkeyRole names it.
var commandName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]*(\|[a-zA-Z][a-zA-Z0-9_-]*)?$`)

// ACLUsers sends ACL USERS: the names of the users the node holds, without their rules.
func (c *Client) ACLUsers(ctx context.Context) ([]string, error) {
	names, err := c.do(ctx, c.c.B().AclUsers().Build()).AsStrSlice()
	return names, c.wrap("acl users", err)
}

// ACLSetUser sends ACL SETUSER name rules..., in one command: Valkey applies all of them or
// none. The error names the user, never a rule (rules carry password hashes).
func (c *Client) ACLSetUser(ctx context.Context, name string, rules []string) error {
	return c.doOK(ctx, "acl setuser "+name, c.c.B().AclSetuser().Username(name).Rule(rules...).Build())
}

// ACLDelUser sends ACL DELUSER name.
func (c *Client) ACLDelUser(ctx context.Context, name string) error {
	return c.doOK(ctx, "acl deluser "+name, c.c.B().AclDeluser().Username(name).Build())
}

// secretParameters are configuration parameters whose values are
// passwords, kept out of error messages.
var secretParameters = []string{"masterauth", "requirepass"}

// ConfigSet sends CONFIG SET with every parameter of params in one
// command, in sorted order; Valkey applies all or none. The error names
// the parameters, never their values, and values of password parameters
// (masterauth, requirepass) are scrubbed from whatever Valkey replies.
func (c *Client) ConfigSet(ctx context.Context, params map[string]string) error {
	if len(params) == 0 {
		return nil
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	cmd := c.c.B().ConfigSet().ParameterValue()
	secrets := []string{c.password}
	for _, k := range keys {
		cmd = cmd.ParameterValue(k, params[k])
		if slices.Contains(secretParameters, strings.ToLower(k)) {
			secrets = append(secrets, params[k])
		}
	}
	op := "config set " + strings.Join(keys, " ")
	return redact(c.wrap(op, c.do(ctx, cmd.Build()).Error()), secrets...)
}

// ConfigGet sends one CONFIG GET with every parameter in keys (Valkey 7 and later take several)
// and returns what the node printed back, by name. A parameter the node does not know is
// absent from the result.
func (c *Client) ConfigGet(ctx context.Context, keys ...string) (map[string]string, error) {
	if len(keys) == 0 {
		return map[string]string{}, nil
	}
	op := "config get"
	m, err := c.do(ctx, c.c.B().ConfigGet().Parameter(keys...).Build()).AsStrMap()
	if err != nil {
		return nil, c.wrap(op, err)
	}
	return m, nil
}

// IsServerError reports whether err carries an error reply from Valkey
// ("ERR ...", "CLUSTERDOWN ...", "WRONGPASS ...") as opposed to a network
// failure or timeout: the node answered, and said no.
func IsServerError(err error) bool {
	var ve *valkeygo.ValkeyError
	return errors.As(err, &ve) && !ve.IsNil()
}

// IsWrongPass reports whether err carries Valkey's WRONGPASS: the node refused the user's
// password (or the user is disabled or unknown to it).
func IsWrongPass(err error) bool {
	var ve *valkeygo.ValkeyError
	return errors.As(err, &ve) && !ve.IsNil() && strings.HasPrefix(ve.Error(), "WRONGPASS")
}

// redactedError replaces an error whose text contained a secret. It keeps
// no chain: the wrapped errors would still print the secret.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// redact returns err, or a copy of its text with every non-empty secret
// replaced, when the text contains one. Valkey echoes arguments in some
// replies (unknown command, bad config value); this is the last line of
// defence against a password reaching a log.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg}
}

// DetachedUser is the masteruser a detached replica authenticates as: a name no node has
// (system users start with "_momento_", and a user-defined one cannot take this reserved name).
const DetachedUser = "_momento_detached"

// Detach stops this node, a replica, from replicating: CONFIG SET masteruser to DetachedUser, so
// that every AUTH it sends its primary from now on fails, then CLIENT KILL TYPE master to drop the
// link it has. It stays a member of the cluster and answers MOVED for its primary's slots, but it
// receives and acknowledges no more writes, so no client's WAIT counts a copy that is about to
// go. The same CONFIG SET sets cluster-replica-no-failover, so that Valkey's own election never
// promotes its frozen copy. In memory only (no CONFIG REWRITE): a restart of the process undoes it.
func (c *Client) Detach(ctx context.Context) error {
	cmd := c.c.B().ConfigSet().ParameterValue().ParameterValue("cluster-replica-no-failover", "yes").ParameterValue("masteruser", DetachedUser).Build()
	if err := c.doOK(ctx, "config set cluster-replica-no-failover masteruser", cmd); err != nil {
		return err
	}
	return c.wrap("client kill type master", c.do(ctx, c.c.B().ClientKill().TypeMaster().Build()).Error())
}
