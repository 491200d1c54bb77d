// Package liveconf knows which valkey.conf settings Valkey takes at run time (CONFIG SET) and
// how to compare their values as Valkey does. It is pure: the spec hash (controllers), the
// observation (valkey) and the settings planner (plan) share this one table, so "applied live"
// means the same thing where a node is hashed, asked and corrected.
//
// The allowlist is conservative: every entry was set with CONFIG SET and read back with
// CONFIG GET on valkey-server 8.0.1 and 9.1.2, and none is a secret or a directive the operator
// forces (resources/conf.go, confDirectives). A setting not listed here needs a new pod.
// notify-keyspace-events is not listed: 8.0.1 reads `KEg$lshzxetmdn` back as `AKEm`, so a value
// with `n` would never verify and be set again on every pass.
package liveconf

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// kind says how a setting's values compare.
type kind int

const (
	// integer: a decimal number, compared as a number ("0300" is 300).
	integer kind = iota
	// memory: bytes with Valkey's units (k=1000, kb=1024, m, mb, g, gb; any case).
	memory
	// enum: one word of a closed set, which Valkey takes in any case and prints in lower case.
	enum
)

// setting is one allowlisted directive: how to compare it and Valkey's default (the same on
// 8.0.1 and 9.1.2, read with CONFIG GET on a server started without a config file). The
// default is what a node runs once the directive is removed from the ValkeyConfig.
type setting struct {
	kind kind
	def  string
	// lo and hi clamp an integer as Valkey does without error (hz above 500 reads back 500).
	lo, hi int64
}

// table is the allowlist. maxclients is in it although its default may read back lower on a
// node whose file-descriptor limit is low: the operator only sets it when a ValkeyConfig names
// it, or removes it from one.
var table = map[string]setting{
	"maxmemory":                 {kind: memory, def: "0"},
	"maxmemory-policy":          {kind: enum, def: "noeviction"},
	"maxmemory-samples":         {kind: integer, def: "5"},
	"hz":                        {kind: integer, def: "10", lo: 1, hi: 500},
	"timeout":                   {kind: integer, def: "0"},
	"maxclients":                {kind: integer, def: "10000"},
	"slowlog-log-slower-than":   {kind: integer, def: "10000"},
	"slowlog-max-len":           {kind: integer, def: "128"},
	"latency-monitor-threshold": {kind: integer, def: "0"},
	"lazyfree-lazy-eviction":    {kind: enum, def: "yes"},
	"lazyfree-lazy-expire":      {kind: enum, def: "yes"},
}

// Keys are the allowlisted settings, sorted: what the observation asks each node for.
func Keys() []string { return slices.Sorted(maps.Keys(table)) }

// IsLive reports whether key (a directive name, any case) is applied live.
func IsLive(key string) bool {
	_, ok := table[strings.ToLower(key)]
	return ok
}

// Default is Valkey's default value of the live setting key.
func Default(key string) (string, bool) {
	s, ok := table[strings.ToLower(key)]
	return s.def, ok
}

// Live returns the live settings of settings (a node's directives), keyed in lower case; nil
// when there is none.
func Live(settings map[string]string) map[string]string {
	var out map[string]string
	for k, v := range settings {
		if IsLive(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[strings.ToLower(k)] = v
		}
	}
	return out
}

// WithoutLive returns a copy of settings without the live ones: what a node needs a restart
// to change.
func WithoutLive(settings map[string]string) map[string]string {
	out := maps.Clone(settings)
	maps.DeleteFunc(out, func(k, _ string) bool { return IsLive(k) })
	return out
}

// Unquote strips the quotes valkey.conf syntax allows around a value (`""` is the empty
// string): CONFIG SET takes the value itself.
func Unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// Normalize returns value as Valkey prints it back for key: memory in bytes, integers in
// decimal (clamped where Valkey clamps), enums in lower case. A value that does not parse is returned trimmed and unquoted, compared as written (Valkey
// refuses it at CONFIG SET, which is reported, not hidden).
func Normalize(key, value string) string {
	v := Unquote(value)
	s, ok := table[strings.ToLower(key)]
	if !ok {
		return v
	}
	switch s.kind {
	case integer:
		// Only what Valkey itself parses as an integer (string2ll: no sign but '-', no leading
		// zero): Go's ParseInt takes "0300" and "+300", which Valkey refuses, and must not make
		// them equal to a value that runs. Valkey clamps hz, not a negative one: it refuses it.
		if !valkeyInteger.MatchString(v) {
			return v
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return v
		}
		if s.hi > 0 && n >= 0 {
			n = min(max(n, s.lo), s.hi)
		}
		return strconv.FormatInt(n, 10)
	case memory:
		if n, ok := parseMemory(v); ok {
			return strconv.FormatUint(n, 10)
		}
		return v
	case enum:
		return strings.ToLower(v)
	}
	return v
}

// valkeyInteger is what Valkey's string2ll accepts.
var valkeyInteger = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// Equal reports whether a and b are the same value of key, as Valkey would run them.
func Equal(key, a, b string) bool { return Normalize(key, a) == Normalize(key, b) }

// units are Valkey's memory units (memtoull): a bare letter is a power of 1000, with b a power
// of 1024.
var units = map[string]uint64{
	"": 1, "b": 1,
	"k": 1000, "kb": 1024,
	"m": 1000 * 1000, "mb": 1024 * 1024,
	"g": 1000 * 1000 * 1000, "gb": 1024 * 1024 * 1024,
}

func parseMemory(v string) (uint64, bool) {
	v = strings.ToLower(v)
	i := len(v)
	for i > 0 && (v[i-1] < '0' || v[i-1] > '9') {
		i--
	}
	mul, ok := units[v[i:]]
	if !ok || i == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:i], 10, 64)
	if err != nil || n > math.MaxUint64/mul {
		return 0, false
	}
	return n * mul, true
}

// Change is one live setting whose value on a node is not the one wanted.
type Change struct {
	Key string
	// Want is the value to set (as written in the spec, unquoted), Have the node's.
	Want, Have string
}

// Diff compares what a node runs (observed, from CONFIG GET) with what it should run: desired,
// the live settings of the spec a node created now is built from, and Valkey's default for a
// setting of recorded (the node's record) that desired no longer has. A setting absent from
// observed is unknown and left alone. The result is sorted by key.
func Diff(desired, recorded, observed map[string]string) []Change {
	want := Want(desired, recorded)
	var out []Change
	for _, k := range slices.Sorted(maps.Keys(want)) {
		have, seen := observed[k]
		if !seen || Equal(k, want[k], have) {
			continue
		}
		out = append(out, Change{Key: k, Want: Unquote(want[k]), Have: have})
	}
	return out
}

// Want is the value of every live setting a node should run: desired's, and Valkey's default
// for a live setting recorded but no longer desired.
func Want(desired, recorded map[string]string) map[string]string {
	want := map[string]string{}
	for k := range Live(recorded) {
		if d, ok := Default(k); ok {
			want[k] = d
		}
	}
	maps.Copy(want, Live(desired))
	return want
}

// SameLive reports whether two sets of directives agree on every live setting (values compared
// with Equal; a setting missing on one side must be missing on the other).
func SameLive(a, b map[string]string) bool {
	la, lb := Live(a), Live(b)
	if len(la) != len(lb) {
		return false
	}
	for k, v := range la {
		w, ok := lb[k]
		if !ok || !Equal(k, v, w) {
			return false
		}
	}
	return true
}
