// Package version says what a Valkey release can do, where the operator behaves differently on
// 8.x and 9.x. It is the one place that knows which major brought what: every "is this Valkey 9
// or later?" of the operator asks a capability of Valkey here, by name, so that a reader sees
// why the behaviour differs and a future 8.x backport (or a 10.x that drops a feature) is one
// line to change.
//
// The capabilities, and where the operator consults them:
//
//	capability           from  Valkey 8 instead                         used by
//	AtomicSlotMigration  9     classic MIGRATE per key, SETSLOT states   the mover, the ACL file (operator's
//	                                                                    commands, slot import rules),
//	                                                                    the reshard planner (AtomicMoves)
//	SafeACLLoad          9     ACL SETUSER / DELUSER per user: 8.0.1     the ACL controller, the ACL file
//	                           crashes a replica on ACL LOAD             (the operator's SETUSER grant)
//	HandsOverOnSIGTERM   9     a preStop hook holds SIGTERM while the    the pod (hook, valkey.conf default),
//	                           operator fails over                      the upgrade planner (MovedHold)
//
// An unknown or unparsable version (a node that did not answer INFO, an image without a
// version) is major 0 and can do none of them: the operator then takes the path that works on
// every release.
package version

import (
	"strconv"
	"strings"
)

// Valkey is a Valkey release as far as the operator's behaviour depends on it: its major
// number. The zero value is an unknown version.
type Valkey struct{ major int }

// Parse reads a Valkey version such as "8.0.1" (a ValkeyImage's version, or INFO server's
// valkey_version); the zero Valkey when it does not parse.
func Parse(s string) Valkey {
	major, _, _ := strings.Cut(s, ".")
	m, err := strconv.Atoi(major)
	if err != nil {
		return Valkey{}
	}
	return Valkey{major: m}
}

// Major is the major number; 0 when the version is unknown. Comparing majors is for what
// depends on the order of releases rather than on a feature (a server refuses the DUMP payloads
// of a later major, so keys move only to the same major or a later one).
func (v Valkey) Major() int { return v.major }

// from9 is every capability's rule today: Valkey 9.0 brought them all.
func (v Valkey) from9() bool { return v.major >= 9 }

// AtomicSlotMigration reports whether the server moves slots with CLUSTER MIGRATESLOTS (and
// knows CLUSTER GETSLOTMIGRATIONS and SYNCSLOTS, which an ACL file may then name); Valkey 8
// refuses those names in an ACL file and moves slots with the classic protocol only.
func (v Valkey) AtomicSlotMigration() bool { return v.from9() }

// SafeACLLoad reports whether ACL LOAD is safe on the server: 8.0.1 crashes a replica on ACL
// LOAD (it dereferences the user of its primary's connection, which has none; measured), and
// later 8.x releases are not assumed fixed.
func (v Valkey) SafeACLLoad() bool { return v.from9() }

// HandsOverOnSIGTERM reports whether the server accepts shutdown-on-sigterm failover, with
// which a primary hands its slots to a synced replica before it exits; Valkey 8 rejects the
// value, so its pods hold SIGTERM back in a preStop hook while the operator fails over.
func (v Valkey) HandsOverOnSIGTERM() bool { return v.from9() }
