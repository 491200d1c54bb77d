package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// The valkey.conf directives that a ValkeyConfig may not set, because the operator sets them
// itself and the cluster breaks (or silently changes meaning) if a user overrides them. The
// CRD refuses each at admission with a CEL rule of its own whose message is
// OwnedDirectiveMessage(name); a test reads the generated CRD and checks that the rules and
// this table agree, so change both together.
//
// One rule per directive (rather than one rule that lists them) because a CEL message can
// only name the offending key by computing over the map's keys, and the API server's static
// cost estimate for that exceeds its budget.
//
// Decided and allowed on purpose:
//   - loglevel: verbosity only; logs still go to stdout.
//   - save, appendonly and the other persistence knobs: tuning, not wiring. A replaced pod is
//     a new node that resyncs from its primary, so the operator relies on no file on disk.
//   - maxmemory, maxmemory-policy, io-threads, timeouts, client limits, loadmodule: tuning.
//
// logfile is owned too, with a message of its own (LogfileMessage).

// ownedDirectiveReasons maps each directive refused by exact name to why the operator owns it.
var ownedDirectiveReasons = map[string]string{}

// ownedPrefixReasons maps each refused directive family to why the operator owns it.
var ownedPrefixReasons = map[string]string{
	"tls-":     "TLS is configured from the cluster's spec.tls",
	"cluster-": "the operator runs the cluster bus and its timeouts",
}

func init() {
	for reason, names := range map[string][]string{
		"it decides where nodes listen, which the Service, the probes and the operator rely on": {
			"port", "bind", "unixsocket", "unixsocketperm", "protected-mode",
		},
		"valkey-server must stay the container's foreground process": {"daemonize", "pidfile"},
		"the operator renders and mounts the node's files":           {"dir", "aclfile", "include", "dbfilename", "appendfilename"},
		"users come only from spec.acl and ValkeyRoles":              {"requirepass", "user"},
		"replicas authenticate with the operator's own user":         {"masterauth", "masteruser", "primaryauth", "primaryuser"},
		"the operator assigns replicas to shards":                    {"replicaof", "slaveof"},
		"nodes announce their own pod address": {
			"replica-announce-ip", "replica-announce-port", "slave-announce-ip", "slave-announce-port",
		},
		"renaming CLUSTER, ACL or CONFIG would lock the operator out": {"rename-command"},
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
const LowercaseMessage = "valkey directive names must be lowercase letters, digits and dashes, as valkey.conf writes them (maxmemory-policy)"

// OwnedDirectives returns the directive names refused by exact name, sorted. logfile is not
// among them (see LogfileDirective).
func OwnedDirectives() []string {
	names := make([]string, 0, len(ownedDirectiveReasons))
	for name := range ownedDirectiveReasons {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// OwnedDirectivePrefixes returns the prefixes of the directive families the operator owns,
// sorted.
func OwnedDirectivePrefixes() []string {
	prefixes := make([]string, 0, len(ownedPrefixReasons))
	for prefix := range ownedPrefixReasons {
		prefixes = append(prefixes, prefix)
	}
	slices.Sort(prefixes)
	return prefixes
}

// OwnedDirectiveMessage returns the CRD's message refusing the directive name (an entry of
// OwnedDirectives), or for a prefix of OwnedDirectivePrefixes the message refusing the whole
// family. It is empty for a directive a ValkeyConfig may set.
func OwnedDirectiveMessage(name string) string {
	if reason, ok := ownedDirectiveReasons[name]; ok {
		return fmt.Sprintf("valkey directive %s is owned by the operator (%s); remove it from spec.valkey", name, reason)
	}
	if reason, ok := ownedPrefixReasons[name]; ok {
		return fmt.Sprintf("valkey directives starting with %s are owned by the operator (%s); remove them from spec.valkey", name, reason)
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
	for prefix, reason := range ownedPrefixReasons {
		if strings.HasPrefix(name, prefix) {
			return fmt.Errorf("valkey directive %s is owned by the operator (%s); remove it from spec.valkey", name, reason)
		}
	}
	return nil
}

// IsOwnedDirective reports whether a ValkeyConfig may not set the directive name because the
// operator owns it, matched as valkey-server matches names (case-insensitively); logfile
// counts as owned. CheckDirective also checks the name's form and the value, and says why.
func IsOwnedDirective(name string) bool {
	name = strings.ToLower(name)
	if name == LogfileDirective || OwnedDirectiveMessage(name) != "" {
		return true
	}
	for prefix := range ownedPrefixReasons {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
