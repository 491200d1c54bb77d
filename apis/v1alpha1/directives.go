package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
//
// Some directives are not refused but bounded: a ValkeyConfig may set them only to values that
// pass a rule (valueRules): the enable-*-command family only to no, and each setting applied live
// (package liveconf) only to a value Valkey takes, so that a value Valkey would refuse at CONFIG
// SET is refused at admission, with a message saying what to write, instead of failing every
// pass of every cluster on the config. Each has a CEL rule of its own too (ValueRuleCEL), kept in
// step with this table by the same test.

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
	reasonModule       = "a module is native code loaded into valkey-server, with every key and every user of the node; on a platform shared by teams none may load one"
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
		// Code of the team's choosing inside the node (a .so file the image holds): refused, not
		// bounded, since no value of it is harmless.
		reasonModule: {"loadmodule"},
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

// quotesMessage is the CRD's message for a directive value whose quotes valkey.conf cannot read.
const quotesMessage = "valkey directive values must be quoted as valkey.conf reads them: a double or single quote that opens a quoted part must close it, and a closing quote must be followed by a space or end the value"

// quotedAsValkeyReads reports whether Valkey can split value into words as it reads a line of
// valkey.conf (sdssplitargs in Valkey's sds.c): a double-quoted part closes, backslash escaping
// the next character inside it; a single-quoted part closes, \' standing for a quote inside it;
// a closing quote is followed by a space or ends the value. Valkey refuses to start on a line it
// cannot split ("Unbalanced quotes in configuration line"): a pod in a crash loop whose status
// names no reason (break test, notify-keyspace-events "\"Ex"). The CRD's rule on ConfigDirectiveValue
// is the same test as a regular expression (TestQuoteRuleIsTheSplitter).
func quotedAsValkeyReads(value string) bool {
	// RE2's \s, as the CRD's rule has it (Valkey also takes a vertical tab there).
	space := func(i int) bool { return i >= len(value) || strings.IndexByte(" \t\n\f\r", value[i]) >= 0 }
	for i := 0; i < len(value); i++ {
		switch value[i] {
		case '"':
			for i++; ; i++ {
				if i >= len(value) {
					return false
				}
				if value[i] == '\\' && i+1 < len(value) {
					i++
					continue
				}
				if value[i] == '"' {
					break
				}
			}
			if !space(i + 1) {
				return false
			}
		case '\'':
			for i++; ; i++ {
				if i >= len(value) {
					return false
				}
				if value[i] == '\\' && i+1 < len(value) && value[i+1] == '\'' {
					i++
					continue
				}
				if value[i] == '\'' {
					break
				}
			}
			if !space(i + 1) {
				return false
			}
		}
	}
	return true
}

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
// operator, values on one line, bounded directives within their rule). The operator runs it over a resolved inheritance chain before
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
	case !quotedAsValkeyReads(value):
		return fmt.Errorf("valkey directive %s: %s", name, quotesMessage)
	}
	if msg := OwnedDirectiveMessage(name); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	if msg := checkValue(name, value); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// RefusedDirective returns why the operator refuses to render the directive name with value
// from a resolved config chain (a relative clause: "which the operator owns"), "" when it may: an owned directive (IsOwnedDirective), or a
// directive bounded to no (enable-debug-command…) set to anything else. Admission refuses both; a
// config stored before a rule existed still must not reach valkey.conf. The value rules of the
// settings applied live are left to Valkey there: a value it refuses is reported as refused
// (LiveSettingsRefused) while the nodes keep the value they run, rather than making the cluster
// Invalid.
func RefusedDirective(name, value string) string {
	if IsOwnedDirective(name) {
		return "which the operator owns"
	}
	if r, ok := valueRules[strings.ToLower(name)]; ok && r.pattern == patternOnlyNo && checkValue(strings.ToLower(name), value) != "" {
		return "which can only be no on a shared platform"
	}
	return ""
}

// valueRule is what a ValkeyConfig may set a bounded directive to: a value that matches pattern
// whole (RE2) and, when max is above zero, is a decimal integer of at most max. Valkey reads every
// value of these as one word, so a rule leaves no room for valkey.conf quotes: the value is
// written bare.
type valueRule struct {
	pattern string
	max     int64
	message string
}

// The value patterns the settings applied live share. Valkey 8.0.1 and 9.1.2 parse them alike
// (config.c: string2ll for integers, no sign but '-', no leading zero; memtoull for sizes; enums
// and booleans in any case): each bound below was tried with CONFIG SET on both. Where Valkey's
// own bound is the 64-bit limit, the rule stops at 18 digits (or, for sizes, at what cannot
// overflow the unit's multiplication, which memtoull does not check: 99999999999gb runs as
// 15140462030378500096 bytes) rather than spell the limit in a regular expression.
const (
	patternInt32   = `^(0|[1-9][0-9]{0,9})$`
	patternInt64   = `^(0|[1-9][0-9]{0,17})$`
	patternYesNo   = `^(?i:yes|no)$`
	patternOnlyNo  = `^(?i:no)$`
	patternMemory  = `^([0-9]{1,19}[bB]?|[0-9]{1,16}[kK][bB]?|[0-9]{1,13}[mM][bB]?|[0-9]{1,10}[gG][bB]?)$`
	patternPolicy  = `^(?i:volatile-lru|volatile-lfu|volatile-random|volatile-ttl|allkeys-lru|allkeys-lfu|allkeys-random|noeviction)$`
	maxInt32       = 2147483647
	maxUint32      = 4294967295
	reasonProtects = "; yes, or local, which anyone who may exec into the pod meets, would open it to every team's clients on a shared platform); remove it from spec.valkey or set it to no"
)

// valueRules are the bounded directives, by name.
var valueRules = map[string]valueRule{
	// Settings applied live (liveconf): a value Valkey refuses would fail CONFIG SET on every
	// pass and a new node's start.
	"maxmemory":                 {pattern: patternMemory, message: "valkey directive maxmemory must be a size in bytes with an optional unit, without quotes: 1500mb, 2gb, 0 for no limit (k, m, g are powers of 1000, kb, mb, gb of 1024; no fraction, no percentage)"},
	"maxmemory-policy":          {pattern: patternPolicy, message: "valkey directive maxmemory-policy must be one of volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"},
	"maxmemory-samples":         {pattern: `^([1-9]|[1-5][0-9]|6[0-4])$`, message: "valkey directive maxmemory-samples must be a whole number from 1 to 64"},
	"hz":                        {pattern: patternInt32, max: maxInt32, message: "valkey directive hz must be a whole number from 0 to 2147483647 (Valkey runs it between 1 and 500)"},
	"timeout":                   {pattern: patternInt32, max: maxInt32, message: "valkey directive timeout must be a whole number of seconds from 0 (idle clients are never closed) to 2147483647"},
	"maxclients":                {pattern: `^[1-9][0-9]{0,9}$`, max: maxUint32, message: "valkey directive maxclients must be a whole number from 1 to 4294967295"},
	"slowlog-log-slower-than":   {pattern: `^(-1|0|[1-9][0-9]{0,17})$`, message: "valkey directive slowlog-log-slower-than must be a whole number of microseconds from -1 (log nothing) to 999999999999999999"},
	"slowlog-max-len":           {pattern: patternInt64, message: "valkey directive slowlog-max-len must be a whole number from 0 to 999999999999999999"},
	"latency-monitor-threshold": {pattern: patternInt64, message: "valkey directive latency-monitor-threshold must be a whole number of milliseconds from 0 (off) to 999999999999999999"},
	"lazyfree-lazy-eviction":    {pattern: patternYesNo, message: "valkey directive lazyfree-lazy-eviction must be yes or no"},
	"lazyfree-lazy-expire":      {pattern: patternYesNo, message: "valkey directive lazyfree-lazy-expire must be yes or no"},
	// Commands that open the node beyond what a team's ACL user may do: no only (their default),
	// so that a config that spells the default out stays valid. Valkey takes them from
	// valkey.conf only (not CONFIG SET).
	"enable-debug-command":     {pattern: patternOnlyNo, message: "valkey directive enable-debug-command can only be no (DEBUG can crash, stall or rewrite a node" + reasonProtects},
	"enable-module-command":    {pattern: patternOnlyNo, message: "valkey directive enable-module-command can only be no (MODULE LOAD runs native code of the client's choosing inside the node" + reasonProtects},
	"enable-protected-configs": {pattern: patternOnlyNo, message: "valkey directive enable-protected-configs can only be no (CONFIG SET of dir, dbfilename and the other protected settings lets a client write files wherever the node may" + reasonProtects},
}

// compiledValueRules are valueRules' patterns, compiled once.
var compiledValueRules = func() map[string]*regexp.Regexp {
	out := map[string]*regexp.Regexp{}
	for name, r := range valueRules {
		out[name] = regexp.MustCompile(r.pattern)
	}
	return out
}()

// ValueRuleDirectives returns the bounded directives (those with a rule on their value), sorted.
func ValueRuleDirectives() []string {
	names := make([]string, 0, len(valueRules))
	for name := range valueRules {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ValueRuleCEL returns the CEL rule on spec.valkey that bounds the directive name, as the CRD
// carries it, and its message; "" for a directive without a rule on its value. The integer
// conversion comes after the pattern, which CEL's || and && evaluate first, so it never sees a
// value it cannot convert.
func ValueRuleCEL(name string) (rule, message string) {
	r, ok := valueRules[name]
	if !ok {
		return "", ""
	}
	match := fmt.Sprintf("self['%s'].matches('%s')", name, r.pattern)
	if r.max > 0 {
		match = fmt.Sprintf("(%s && int(self['%s']) <= %d)", match, name, r.max)
	}
	return fmt.Sprintf("!('%s' in self) || %s", name, match), r.message
}

// checkValue returns the message of the rule name's value breaks, "" when it passes or name has
// no rule.
func checkValue(name, value string) string {
	r, ok := valueRules[name]
	if !ok {
		return ""
	}
	if !compiledValueRules[name].MatchString(value) {
		return r.message
	}
	if r.max > 0 {
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n > r.max {
			return r.message
		}
	}
	return ""
}

// IsOwnedDirective reports whether a ValkeyConfig may not set the directive name because the
// operator owns it, matched as valkey-server matches names (case-insensitively); logfile
// counts as owned. CheckDirective also checks the name's form and the value, and says why.
func IsOwnedDirective(name string) bool {
	name = strings.ToLower(name)
	return name == LogfileDirective || OwnedDirectiveMessage(name) != ""
}
