package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// The valkey.conf directives that a ValkeyConfig may not set (SPEC §2.8): the original
// silently overrides its forced settings (reference/forced-settings.md); we refuse them at
// admission instead, naming the directive and why, so that what a user wrote is what runs.
// Every other directive passes through to valkey.conf, as in the original: the rest of the
// cluster-* and tls-* families (cluster-allow-reads-when-down, cluster-require-full-coverage,
// tls-protocols, tls-ciphersuites…), persistence, memory and client tuning, loglevel.
//
// The CRD refuses each with a CEL rule of its own whose message is OwnedDirectiveMessage(name);
// a test reads the generated CRD and checks that the rules and this table agree, so change both
// together. One rule per directive (rather than one rule that lists them) because a CEL message
// can only name the offending key by computing over the map's keys, and the API server's static
// cost estimate for that exceeds its budget.
//
// logfile is refused too, with a message of its own (LogfileMessage).

// ownedDirectiveReasons maps each refused directive to why the operator owns it.
var ownedDirectiveReasons = map[string]string{}

// Reasons, one per group of refused directives.
const (
	reasonForcedListen = "forced: the Service, the probes and the operator reach every node on port 6379 of its pod IP"
	reasonForcedBus    = "forced: the operator runs every node in cluster mode with its own bus settings and failure-detection timeout"
	reasonForcedFiles  = "forced: the operator renders and mounts the node's data directory and ACL file"
	reasonForcedRepl   = "forced: replicas authenticate to their primary as the operator's replication user"
	reasonForcedTLS    = "forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike"
	reasonDaemonize    = "valkey-server must stay the container's foreground process, or the pod exits as soon as it starts"
	reasonInclude      = "the operator includes its own file of credentials; another include could override forced settings"
	reasonUser         = "Valkey refuses user lines beside the operator's ACL file; bind users in spec.acl with ValkeyRoles"
	reasonRequirepass  = "the operator's ACL file defines the default user, so requirepass would be silently overridden; bind default in spec.acl"
	reasonReplicaof    = "Valkey refuses replicaof in cluster mode; the operator assigns replicas to shards"
	reasonRename       = "renaming CLUSTER, ACL or CONFIG would lock the operator out"
	reasonAnnounce     = "forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster"
)

func init() {
	for reason, names := range map[string][]string{
		// reference/forced-settings.md, base settings (primaryuser's and primaryauth's old
		// names are the same settings), plus the bus port, which the headless Service publishes.
		reasonForcedListen: {"port", "bind", "protected-mode"},
		reasonForcedBus:    {"cluster-enabled", "cluster-node-timeout", "cluster-config-file", "cluster-port"},
		reasonForcedFiles:  {"dir", "aclfile"},
		reasonForcedRepl:   {"primaryuser", "primaryauth", "masteruser", "masterauth"},
		// reference/forced-settings.md, TLS-mode settings.
		reasonForcedTLS: {
			"tls-port", "tls-cluster", "tls-replication", "tls-cert-file", "tls-key-file",
			"tls-ca-cert-file", "tls-auth-clients", "cluster-announce-hostname",
			"cluster-preferred-endpoint-type",
		},
		// SPEC §2.8: directives that cannot work beside the forced ones.
		reasonDaemonize:   {"daemonize"},
		reasonInclude:     {"include"},
		reasonUser:        {"user"},
		reasonRequirepass: {"requirepass"},
		reasonReplicaof:   {"replicaof", "slaveof"},
		reasonRename:      {"rename-command"},
		// Announced addresses: a node that announces another IP or port than its pod's is
		// unreachable on the bus (break test: a roll with cluster-announce-ip retired the
		// shard's healthy replica, then retried its failover to the unreachable new node
		// forever).
		reasonAnnounce: {
			"cluster-announce-ip", "cluster-announce-port", "cluster-announce-bus-port",
			"cluster-announce-tls-port", "cluster-announce-client-ipv4", "cluster-announce-client-ipv6",
			"replica-announce-ip", "replica-announce-port", "slave-announce-ip", "slave-announce-port",
		},
	} {
		for _, name := range names {
			ownedDirectiveReasons[name] = reason
		}
	}
}

// LogfileDirective is the directive with a message of its own: set, it sends the node's log
// into a file inside the container, where `kubectl logs` never sees it.
const LogfileDirective = "logfile"

// LogfileMessage is the CRD's message for a ValkeyConfig that sets logfile.
const LogfileMessage = "valkey directive logfile cannot be set: node logs must go to stdout, where kubectl logs shows them; remove logfile from spec.valkey (loglevel is allowed)"

// oneLineMessage is the CRD's message for a directive value with a line break.
const oneLineMessage = "valkey directive values must be one line: a line break would start another directive"

// LowercaseMessage starts the CRD's message for a directive name that is not lowercase; the
// CRD's message then names the first such key.
const LowercaseMessage = "valkey directive names must be lowercase letters, digits and dashes, as valkey.conf writes them (maxmemory-policy), so that the refusal of forced directives sees every spelling"

// OwnedDirectives returns the directive names a ValkeyConfig may not set, sorted. logfile is
// not among them (see LogfileDirective).
func OwnedDirectives() []string {
	names := make([]string, 0, len(ownedDirectiveReasons))
	for name := range ownedDirectiveReasons {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// OwnedDirectiveMessage returns the CRD's message refusing the directive name (an entry of
// OwnedDirectives). It is empty for a directive a ValkeyConfig may set.
func OwnedDirectiveMessage(name string) string {
	if reason, ok := ownedDirectiveReasons[name]; ok {
		return fmt.Sprintf("valkey directive %s cannot be set (%s); remove it from spec.valkey", name, reason)
	}
	return ""
}

// CheckDirective returns why a ValkeyConfig may not set the valkey.conf directive name to
// value, or nil: the CRD's rules on spec.valkey, in Go (names lowercase, not owned by the
// operator, values on one line). The operator runs it over a resolved inheritance chain before
// rendering, so that a config stored before a rule existed (or written around admission) makes
// its clusters Invalid instead of reaching valkey.conf.
func CheckDirective(name, value string) error {
	switch {
	case name == LogfileDirective:
		return fmt.Errorf("%s", LogfileMessage)
	case name == "" || strings.ToLower(name) != name || strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
		return fmt.Errorf("%s: %q", LowercaseMessage, name)
	case strings.ContainsAny(value, "\r\n"):
		return fmt.Errorf("valkey directive %s: %s", name, oneLineMessage)
	}
	if msg := OwnedDirectiveMessage(name); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// IsOwnedDirective reports whether a ValkeyConfig may not set the directive name because the
// operator owns it, matched as valkey-server matches names (case-insensitively); logfile
// counts as owned. CheckDirective also checks the name's form and the value, and says why.
func IsOwnedDirective(name string) bool {
	name = strings.ToLower(name)
	return name == LogfileDirective || OwnedDirectiveMessage(name) != ""
}
