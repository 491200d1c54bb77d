package liveconf

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Changes that evict are held until confirmed (issue 35). A live setting reaches every node of
// every cluster on a ValkeyConfig in one pass, so a maxmemory cut on a config many teams share
// evicted most of every team's keys within seconds (tried: 100mb to 4mb left 752 and 755 of
// 20 000 keys on two clusters 15 s later), and a removed maxmemory set 0, no limit, on every
// node: a node that then outgrows its container is killed. Hold decides, for one cluster, which
// of its live settings' changes wait for a person to confirm them. Its rules, in order:
//
//  1. Only a cluster that runs nodes: the values its Active nodes record (their ValkeyNodes'
//     spec.valkeySettings, which only the operator writes, and which say what each node was
//     set to). A cluster being created starts with the spec's values: nothing runs to evict.
//  2. maxmemory lower than the least limiting value a node runs (0, or no maxmemory, is no
//     limit) is held: Valkey evicts (or, under noeviction, refuses writes) down to it at once.
//  3. maxmemory removed from the spec while a node runs a limit is held: Valkey's default is 0,
//     no limit, and that is never set without being asked for (confirmed as maxmemory=0, or an
//     explicit maxmemory in the ValkeyConfig).
//  4. maxmemory-policy other than a node runs (no maxmemory-policy is noeviction) is held, unless
//     the maxmemory the nodes keep after this pass is 0: without a limit no policy evicts.
//  5. A held change is confirmed by a confirmation naming the setting and the value it goes to
//     (compared as Valkey compares them, Equal): a confirmation of another value confirms
//     nothing, so one written for an earlier change never lets a later one through.
//  6. A held setting keeps the value the nodes run in the spec that the pass builds from
//     (effective): the nodes are not set, and a node created meanwhile (a replacement, a roll)
//     starts with the same value as its neighbours. Of several running values, maxmemory keeps
//     the least limiting, maxmemory-policy the first node's (by the order of running) that differs
//     from the spec.
//
// Everything else (an increase, the other live settings, a value the nodes already run) is
// applied at once, as before. The decision reads only the cluster's own records and the
// confirmations, so it needs no memory of its own and no state shared between clusters.

// HoldReason says why a change is held.
type HoldReason string

// Hold reasons.
const (
	// HoldLower: maxmemory goes below what a node runs.
	HoldLower HoldReason = "lower"
	// HoldRemoved: maxmemory is no longer in the spec while a node runs a limit.
	HoldRemoved HoldReason = "removed"
	// HoldPolicy: maxmemory-policy changes.
	HoldPolicy HoldReason = "policy"
)

// Held is one live setting whose change waits for a confirmation.
type Held struct {
	Key string
	// Running is the value the nodes keep, as recorded ("" when no node records it: Valkey's
	// default runs); Want the value the spec asks for ("" when the spec removed it).
	Running, Want string
	Reason        HoldReason
}

// Confirmation is what confirms h: the setting and the value it goes to, as
// key=value (a removal goes to Valkey's default).
func (h Held) Confirmation() string {
	want := h.Want
	if want == "" {
		want, _ = Default(h.Key)
	}
	return h.Key + "=" + want
}

// Confirmations are the values confirmed by people, setting to values (ParseConfirmations).
type Confirmations map[string][]string

// ParseConfirmations reads confirmations written as key=value pairs separated by commas or
// spaces ("maxmemory=4mb,maxmemory-policy=allkeys-lru"); pairs without "=" are skipped. Several
// texts (the cluster's own, each config's of its chain) add up.
func ParseConfirmations(texts ...string) Confirmations {
	out := Confirmations{}
	for _, text := range texts {
		for _, pair := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			k, v, ok := strings.Cut(pair, "=")
			if ok && k != "" {
				k = strings.ToLower(k)
				out[k] = append(out[k], v)
			}
		}
	}
	return out
}

// confirms reports whether c confirms key going to want.
func (c Confirmations) confirms(key, want string) bool {
	return slices.ContainsFunc(c[key], func(v string) bool { return Equal(key, v, want) })
}

// Hold applies the rules above to one cluster: desired is the spec's valkey settings (every
// directive, live or not), running the recorded settings of its Active nodes (in a stable order:
// by pod name), confirmed what people confirmed. It returns the settings to build the pass from
// (desired with each held setting at its running value; desired itself when nothing is held) and
// the held changes, sorted by key.
func Hold(desired map[string]string, running []map[string]string, confirmed Confirmations) (map[string]string, []Held) {
	if len(running) == 0 {
		return desired, nil
	}
	var held []Held
	keep := map[string]string{} // held key -> running value ("" to leave it out)

	// maxmemory: the least limiting value a node runs, 0 for none.
	runRaw, runBytes, seen := "", uint64(0), false
	for _, rec := range running {
		raw := rec["maxmemory"] // none recorded: Valkey's default, 0
		n, ok := bytesOf(orDefault(raw, raw != "", "0"))
		if !ok {
			continue // a value Valkey refused is not what the node runs
		}
		if !seen || n == 0 || (runBytes != 0 && n > runBytes) {
			runRaw, runBytes, seen = raw, n, true
		}
	}
	wantRaw, set := desired["maxmemory"]
	afterBytes := runBytes
	switch wantBytes, ok := bytesOf(wantRaw); {
	case !seen:
		// No node's value is known: nothing to compare with, nothing held.
	case !set && runBytes != 0:
		if h := (Held{Key: "maxmemory", Running: runRaw, Reason: HoldRemoved}); !confirmed.confirms(h.Key, "0") {
			held, keep[h.Key] = append(held, h), runRaw
		} else {
			afterBytes = 0
		}
	case set && ok && wantBytes != 0 && (runBytes == 0 || wantBytes < runBytes):
		if h := (Held{Key: "maxmemory", Running: runRaw, Want: wantRaw, Reason: HoldLower}); !confirmed.confirms(h.Key, wantRaw) {
			held, keep[h.Key] = append(held, h), runRaw
		} else {
			afterBytes = wantBytes
		}
	case set && ok:
		afterBytes = wantBytes
	case !set:
		afterBytes = 0
	}

	// maxmemory-policy: the first node's that differs from the spec's.
	const policy = "maxmemory-policy"
	def, _ := Default(policy)
	want, pset := desired[policy]
	if !pset {
		want = def
	}
	for _, rec := range running {
		raw, ok := rec[policy]
		if Equal(policy, orDefault(raw, ok, def), want) {
			continue
		}
		if afterBytes != 0 && !confirmed.confirms(policy, want) {
			h := Held{Key: policy, Want: desired[policy], Reason: HoldPolicy}
			if ok {
				h.Running = raw
			}
			held, keep[policy] = append(held, h), h.Running
		}
		break
	}
	if len(held) == 0 {
		return desired, nil
	}
	effective := maps.Clone(desired)
	for k, v := range keep {
		if v == "" {
			delete(effective, k)
		} else {
			effective[k] = v
		}
	}
	slices.SortFunc(held, func(a, b Held) int { return strings.Compare(a.Key, b.Key) })
	return effective, held
}

// bytesOf is a maxmemory value in bytes, as Valkey reads it.
func bytesOf(v string) (uint64, bool) {
	n, err := strconv.ParseUint(Normalize("maxmemory", v), 10, 64)
	return n, err == nil
}

func orDefault(v string, ok bool, def string) string {
	if ok {
		return v
	}
	return def
}
