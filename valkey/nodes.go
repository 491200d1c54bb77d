package valkey

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Role is what a node is in its shard, in the Go API's words.
type Role string

const (
	// RolePrimary is a node that serves slots; Valkey prints "master".
	RolePrimary Role = "primary"
	// RoleReplica is a node that copies a primary; Valkey prints "slave".
	RoleReplica Role = "replica"
	// RoleUnknown is a node whose flags name neither role, such as a node
	// still in handshake (flags "handshake" or "noflags").
	RoleUnknown Role = ""
)

// Node flags as ParseClusterNodes reports them in NodeEntry.Flags: Valkey's
// own words, except that "master" and "slave" become FlagPrimary and
// FlagReplica.
const (
	FlagMyself     = "myself"
	FlagPrimary    = "primary"
	FlagReplica    = "replica"
	FlagPFail      = "fail?"
	FlagFail       = "fail"
	FlagHandshake  = "handshake"
	FlagNoAddr     = "noaddr"
	FlagNoFailover = "nofailover"
	FlagNoFlags    = "noflags"
)

// SlotMigration is one open slot printed by the node that is moving it:
// MIGRATING to NodeID ("[slot->-id]") or IMPORTING from NodeID
// ("[slot-<-id]"). Open slots are the normal leftover of an interrupted
// migration; they must be found and repaired on every pass.
type SlotMigration struct {
	Slot   int
	NodeID string
}

// NodeEntry is one line of CLUSTER NODES: one node as the answering node
// sees it.
type NodeEntry struct {
	// ID is the 40-hex node id.
	ID string
	// IP is empty while the node has not learnt its own address (a fresh
	// node prints ":6379@16379" for itself) and for a noaddr node.
	IP      string
	Port    int
	BusPort int
	// Hostname is the announced hostname, empty when none is set.
	Hostname string
	// ShardID is set only when the text carries it (nodes.conf does,
	// CLUSTER NODES does not).
	ShardID string
	// Flags are the node's flags in the order printed, normalised to
	// primary/replica; "noflags" is dropped.
	Flags      []string
	Myself     bool
	Role       Role
	Fail       bool // flag "fail": the cluster agreed that the node is down
	PFail      bool // flag "fail?": this node alone suspects it
	Handshake  bool
	NoAddr     bool
	NoFailover bool
	// PrimaryID is the primary a replica follows; empty when Valkey prints "-".
	PrimaryID string
	// PingSent and PongRecv are Unix milliseconds, 0 when none is pending
	// or none was received.
	PingSent    int64
	PongRecv    int64
	ConfigEpoch uint64
	// Connected is the link state: true for "connected".
	Connected bool
	// Slots are the slots the node serves, normalised.
	Slots     SlotRanges
	Migrating []SlotMigration
	Importing []SlotMigration
}

// Addr returns "ip:port", the address clients and this package dial.
func (e NodeEntry) Addr() string {
	return joinHostPort(e.IP, e.Port)
}

// HasFlag reports whether e carries flag (in the normalised words).
func (e NodeEntry) HasFlag(flag string) bool {
	for _, f := range e.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Myself returns the entry flagged "myself", if any.
func Myself(entries []NodeEntry) (NodeEntry, bool) {
	for _, e := range entries {
		if e.Myself {
			return e, true
		}
	}
	return NodeEntry{}, false
}

// ParseClusterNodes parses the text of CLUSTER NODES, one entry per
// non-empty line, in the order printed. It also accepts the lines of a
// nodes.conf file (auxiliary fields after the hostname, and the trailing
// "vars" line, which it skips). Any malformed line makes it fail with the
// line number: a half-understood topology is worse than none.
func ParseClusterNodes(text string) ([]NodeEntry, error) {
	var out []NodeEntry
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "vars ") {
			continue
		}
		e, err := parseNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("cluster nodes line %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func parseNodeLine(line string) (NodeEntry, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return NodeEntry{}, fmt.Errorf("want at least 8 fields, got %d", len(f))
	}
	var e NodeEntry
	var err error
	if e.ID, err = parseNodeID(f[0]); err != nil {
		return NodeEntry{}, err
	}
	if err = parseAddress(f[1], &e); err != nil {
		return NodeEntry{}, err
	}
	parseFlags(f[2], &e)
	if f[3] != "-" {
		if e.PrimaryID, err = parseNodeID(f[3]); err != nil {
			return NodeEntry{}, fmt.Errorf("primary: %w", err)
		}
	}
	if e.PingSent, err = parseMillis(f[4]); err != nil {
		return NodeEntry{}, fmt.Errorf("ping sent: %w", err)
	}
	if e.PongRecv, err = parseMillis(f[5]); err != nil {
		return NodeEntry{}, fmt.Errorf("pong received: %w", err)
	}
	if e.ConfigEpoch, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return NodeEntry{}, fmt.Errorf("config epoch %q: %w", f[6], errNotNumber)
	}
	switch f[7] {
	case "connected":
		e.Connected = true
	case "disconnected":
	default:
		return NodeEntry{}, fmt.Errorf("unknown link state %q", f[7])
	}
	for _, s := range f[8:] {
		if err := parseSlotField(s, &e); err != nil {
			return NodeEntry{}, err
		}
	}
	e.Slots = e.Slots.Normalize()
	return e, nil
}

var errNotNumber = errors.New("not a number")

// parseNodeID accepts the ids Valkey generates: 40 lower-case hex digits.
func parseNodeID(s string) (string, error) {
	if len(s) != 40 {
		return "", fmt.Errorf("node id %q: want 40 hex digits", s)
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("node id %q: want 40 hex digits", s)
		}
	}
	return s, nil
}

// parseAddress reads "ip:port@cport[,hostname[,key=value...]]". The ip may
// be empty (a fresh node) or IPv6 (the last colon before "@" ends it). Very
// old servers print no "@cport"; BusPort is then 0.
func parseAddress(s string, e *NodeEntry) error {
	parts := strings.Split(s, ",")
	hostPort, bus, hasBus := strings.Cut(parts[0], "@")
	colon := strings.LastIndexByte(hostPort, ':')
	if colon < 0 {
		return fmt.Errorf("address %q: no port", s)
	}
	e.IP = strings.TrimSuffix(strings.TrimPrefix(hostPort[:colon], "["), "]")
	var err error
	if e.Port, err = parsePort(hostPort[colon+1:]); err != nil {
		return fmt.Errorf("address %q: %w", s, err)
	}
	if hasBus {
		if e.BusPort, err = parsePort(bus); err != nil {
			return fmt.Errorf("address %q: bus %w", s, err)
		}
	}
	if len(parts) > 1 {
		e.Hostname = parts[1]
	}
	for _, aux := range parts[min(2, len(parts)):] {
		if v, ok := strings.CutPrefix(aux, "shard-id="); ok {
			e.ShardID = v
		}
	}
	return nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("port %q invalid", s)
	}
	return n, nil
}

func parseMillis(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: %w", s, errNotNumber)
	}
	return n, nil
}

// parseFlags keeps unknown flags as printed: a newer Valkey may add some,
// and refusing the whole topology for that would blind the operator.
func parseFlags(s string, e *NodeEntry) {
	for _, flag := range strings.Split(s, ",") {
		switch flag {
		case "", FlagNoFlags:
			continue
		case "master", FlagPrimary:
			flag = FlagPrimary
			e.Role = RolePrimary
		case "slave", FlagReplica:
			flag = FlagReplica
			e.Role = RoleReplica
		case FlagMyself:
			e.Myself = true
		case FlagFail:
			e.Fail = true
		case FlagPFail:
			e.PFail = true
		case FlagHandshake:
			e.Handshake = true
		case FlagNoAddr:
			e.NoAddr = true
		case FlagNoFailover:
			e.NoFailover = true
		}
		e.Flags = append(e.Flags, flag)
	}
}

// parseSlotField reads "5461", "0-5460", "[100->-id]" or "[100-<-id]".
func parseSlotField(s string, e *NodeEntry) error {
	inner, ok := strings.CutPrefix(s, "[")
	if !ok {
		r, err := ParseSlotRange(s)
		if err != nil {
			return err
		}
		e.Slots = append(e.Slots, r)
		return nil
	}
	inner, ok = strings.CutSuffix(inner, "]")
	if !ok {
		return fmt.Errorf("open slot %q: no closing bracket", s)
	}
	if slot, id, found := strings.Cut(inner, "->-"); found {
		m, err := parseMigration(slot, id)
		if err != nil {
			return fmt.Errorf("migrating slot %q: %w", s, err)
		}
		e.Migrating = append(e.Migrating, m)
		return nil
	}
	if slot, id, found := strings.Cut(inner, "-<-"); found {
		m, err := parseMigration(slot, id)
		if err != nil {
			return fmt.Errorf("importing slot %q: %w", s, err)
		}
		e.Importing = append(e.Importing, m)
		return nil
	}
	return fmt.Errorf("open slot %q: want [slot->-id] or [slot-<-id]", s)
}

func parseMigration(slot, id string) (SlotMigration, error) {
	n, err := parseSlot(slot)
	if err != nil {
		return SlotMigration{}, err
	}
	if id, err = parseNodeID(id); err != nil {
		return SlotMigration{}, err
	}
	return SlotMigration{Slot: n, NodeID: id}, nil
}

// joinHostPort is net.JoinHostPort for an int port, kept here so that the
// pure files do not import net for one call.
func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
