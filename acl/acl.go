// Package acl renders the ACL file every node of a cluster loads, from the merged bindings, the
// roles they name and the operator's system users, and reads ACL rules back into one comparable
// form (Normalize), so that what a node enforces can be compared with the file. It also adapts
// the file to a node's release (ForValkey8, WithSetUsers). Pure: the ACL controller loads the
// file onto the nodes.
package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The rendered ACL file, in order:
//
//  1. The merged bindings (MergeBindings): the config's (ResolvedConfig.ACL, replaced, not
//     merged, along the baseRef chain), then the cluster's own. A username bound at both levels
//     is a spec problem: a team cannot redefine a platform user.
//  2. Each binding's first permission is the user's root rule; every further permission is a
//     parenthesised selector with its own commands, keys and channels, so that read on a:* and
//     write on b:* never add up to write on a:*.
//  3. The root rule of every bound user also allows clusterClientCommands, before the role's own
//     rules (so a role may still deny one): without them a cluster client cannot even learn the
//     topology, and a role of @read and @write alone would be useless to it.
//  4. The default user: open (no password, everything) while no binding exists anywhere; off
//     as soon as one exists, unless `default` itself is bound (then its binding is its line).
//  5. The system users, last: _momento_operator runs exactly the operator's commands and
//     _momento_repl replicates; neither has a key or channel pattern.

// Usernames of the operator's system users. The _momento_ prefix is refused at admission for
// bindings, so no binding can collide with them.
const (
	// OperatorUser is the Valkey user the operator runs CLUSTER and ACL commands with.
	OperatorUser = "_momento_operator"
	// ReplicationUser is the user replicas authenticate to their primary with (masteruser).
	ReplicationUser = "_momento_repl"
	// MigrationUser is the user that moves keys between primaries while slots move (MIGRATE on
	// the source, RESTORE-ASKING on the target): the one system user with key access, used by
	// nothing else.
	MigrationUser = "_momento_migrate"
)

// operatorCommands are the commands the operator runs on a node, and nothing else: observing
// (CLUSTER NODES / INFO, INFO, PING), forming and healing (CLUSTER MYID, MEET, ADDSLOTSRANGE,
// REPLICATE, FAILOVER, FORGET, COUNTKEYSINSLOT; BUMPEPOCH, so that a TAKEOVER's claim on the
// slots does not tie with the lost primary's config epoch: plan/epoch.go), the ACL controller (ACL LOAD, ACL LIST, and
// ACL USERS: the names alone, read before the rules so that a node holding far more users than
// the file is not read whole), and the check that every node knows the categories and commands
// the roles name (ACL CAT, COMMAND LIST: controllers/rolenames.go).
// client|setinfo is what valkey-go sends after HELLO (its library name). No key or channel
// pattern goes with them: the operator reads and writes no key.
//
// Slot moves: the operator sets slot states (SETSLOT) and lists a slot's key names
// (GETKEYSINSLOT); MIGRATE itself needs key access and is run as MigrationUser. On Valkey 9
// also the atomic migration's CLUSTER MIGRATESLOTS / GETSLOTMIGRATIONS (operatorCommands9),
// which Valkey 8 does not know and would refuse in the ACL file.
//
// ACL GETUSER reads the password hashes of one system user while a rotation of the system
// passwords is under way (controllers/rotation.go): no more than ACL LIST shows already.
//
// CONFIG SET and CLIENT KILL detach a replica the operator retires from its primary
// (valkey.Client.Detach: masteruser set to a user no node has, the replication link dropped), so
// that in the seconds it still answers MOVED it acknowledges no write a client's WAIT counts
// (chaos seed 4242 lost 48 writes a retiring replica had acknowledged); CONFIG SET also reloads
// a TLS cluster's certificate files. CONFIG SET is a wide grant, but no wider than what this
// user already holds over the cluster: it can forget every node, or take any shard over.
//
// CONFIG SET and CONFIG GET also apply the settings Valkey takes at run time (package liveconf)
// and read them back on every pass, to verify and to put back a value changed by hand. CONFIG
// GET shows no secret to this user that it does not hold already: masterauth is its own
// cluster's replication password, which its credential Secret holds beside its own.
var operatorCommands = []string{
	"ping", "info",
	"cluster|nodes", "cluster|info", "cluster|myid", "cluster|meet", "cluster|addslotsrange",
	"cluster|replicate", "cluster|failover", "cluster|bumpepoch", "cluster|forget", "cluster|countkeysinslot",
	"cluster|setslot", "cluster|getkeysinslot",
	"acl|load", "acl|list", "acl|users", "acl|getuser", "acl|cat", "command|list",
	"client|setinfo", "client|kill", "config|set", "config|get",
}

// operatorCommands9 are the operator's Valkey 9 commands (atomic slot migration).
var operatorCommands9 = []string{"cluster|migrateslots", "cluster|getslotmigrations"}

// migrationCommands are MigrationUser's: MIGRATE on the source, and what MIGRATE sends the
// target under this user's AUTH2 (SELECT of the database, RESTORE-ASKING, RESTORE), with ASKING and PING
// (NOPERM for select without it, measured on 8.0.1).
var migrationCommands = []string{"migrate", "restore", "restore-asking", "asking", "select", "ping", "client|setinfo"}

// clusterClientCommands are what a cluster client sends besides its data commands: PING, the
// topology (CLUSTER SLOTS / SHARDS / NODES / INFO / MYID, as different client libraries ask),
// ASKING, READONLY and READWRITE around redirections and replica reads, and the client's name and
// library (CLIENT SETNAME / SETINFO). None reads or writes a key.
var clusterClientCommands = []string{
	"ping", "cluster|slots", "cluster|shards", "cluster|nodes", "cluster|info", "cluster|myid",
	"asking", "readonly", "readwrite", "client|setname", "client|setinfo",
}

// replicationCommands are what a replica sends its primary as masteruser: PING and REPLCONF
// during the handshake, PSYNC to sync, REPLCONF ACK afterwards. The whole dataset flows over
// PSYNC, so this user is as sensitive as the data; it still runs no command on a key. ROLE is
// the Valkey 8 preStop hook's (preStopScript): whether the node is a primary with an online
// replica. It reads no key and shows less than the PSYNC stream already does. CLUSTER FAILOVER is
// the same hook's, sent to that replica when the operator has not handed the primary over in
// time (the operator down mid-handover). ACLs cannot narrow it to the graceful form, so the
// user may also FORCE or TAKEOVER: no more than a holder of this password (every pod of the
// cluster, and whoever reads one's files) can already do with the whole dataset in hand.
var replicationCommands = []string{"psync", "replconf", "ping", "role", "cluster|failover"}

// slotImportGrants and slotImportCommands (the slot import rules) widen ReplicationUser for
// Valkey 9's atomic slot migration, and only while a reshard of a Valkey 9 cluster is pending
// (SystemUsers.SlotImport). The source of a CLUSTER MIGRATESLOTS connects to the target as its masteruser, sends CLUSTER SYNCSLOTS, then streams the
// slots' snapshot and every write its clients make meanwhile, and the target runs each of those
// commands as that user, ACL checks included (unlike a replica, which applies its primary's
// stream as a superuser). Measured on 9.1.2 (two bare nodes, strings, lists, hashes with field
// TTLs, sets, sorted sets, streams with groups, HyperLogLogs and bitmaps, 1 M keys, MULTI/EXEC
// and EVAL during the move, default user off): `+cluster|syncslots` alone fails with NOPERM on
// SELECT; `~* +@write -@dangerous` before the replication commands and `+select
// +cluster|syncslots` after them succeeds (valkey-io/valkey#2392 and the valkey.io blog on ASM's ACL needs say the same).
// @write, because the stream carries whatever write a client runs on a moving slot (a command
// left out fails the migration, not the client); -@dangerous drops FLUSHALL, FLUSHDB, SWAPDB,
// RESTORE, MIGRATE, SORT and the like, which the stream does not carry. Order matters:
// -@dangerous also takes PSYNC, REPLCONF and CLUSTER away, so the categories (slotImportGrants)
// come before the replication commands and the commands (slotImportCommands) after them
// (measured: with -@dangerous last, every replica's PSYNC failed with NOPERM). Valkey 8 knows
// neither SYNCSLOTS nor atomic moves: ForValkey8 strips these rules for its nodes.
var (
	slotImportGrants   = []string{"~*", "+@write", "-@dangerous"}
	slotImportCommands = []string{"+select", "+cluster|syncslots"}
)

// ReplicationRule is ReplicationUser's rule: the replication commands, with the slot import
// rules around them when slotImport.
func ReplicationRule(slotImport bool) []string {
	out := []string{"resetkeys", "resetchannels", "-@all"}
	if slotImport {
		out = append(out, slotImportGrants...)
	}
	for _, c := range replicationCommands {
		out = append(out, "+"+c)
	}
	if slotImport {
		out = append(out, slotImportCommands...)
	}
	return out
}

// SystemUsers are the secrets and the state the system users are rendered from.
type SystemUsers struct {
	OperatorPassword, ReplPassword, MigratePassword string
	// OperatorAlso, ReplAlso and MigrateAlso are passwords each user also accepts ("" for
	// none): the next ones, or the old ones, while a rotation of the system passwords is under
	// way (resources.ForPhase).
	OperatorAlso, ReplAlso, MigrateAlso string
	// Atomic: the cluster's image is Valkey 9 or later: the operator's user gets the atomic slot
	// migration's commands (operatorCommands9), which Valkey 8 refuses in an ACL file; the ACL
	// controller strips them for any 8.x node still running (ForValkey8).
	Atomic bool
	// SlotImport: a reshard is pending (plan.ReshardPending) on a cluster whose image is Valkey 9:
	// the replication user gets the slot import rules until the slots are where they belong, and loses
	// them with the first pass that finds nothing left to move.
	SlotImport bool
	// LegacyReplication: a live node was started by an operator version whose replicas
	// authenticated as _momento_operator (masteruser is read once, at start), and whose
	// liveness probe authenticates as _momento_operator with auth.conf's masterauth, which is
	// now the replication password. Until the last such node is replaced, the operator user
	// also replicates and also accepts the replication password, so that an operator upgrade
	// breaks neither replication nor the old pods' probe. This is no weaker than before (the
	// old auth.conf held the operator's own password), and ends by itself.
	LegacyReplication bool
	// SetUsers: the cluster runs Valkey 8, where ACL LOAD crashes a replica (8.0.1 dereferences
	// the user of its primary's connection, which has none). The ACL controller applies the
	// file there with ACL SETUSER / DELUSER instead (see version.Valkey.SafeACLLoad), which the operator's user
	// must then be allowed. That is a wider grant (the user could grant itself more), so it is
	// given only to clusters whose image is Valkey 8.
	SetUsers bool
}

// KeepsOperator reports whether file lets the operator back in once applied: its user line
// for OperatorUser is on and holds the hash of password. Every file Render makes does. The file
// is read from the {cluster}-acl Secret, which anyone who may edit Secrets in the namespace can
// rewrite; applied as it stood, a file without that line deleted the operator's own user on
// every node (break test: a team's edit of the Secret, reverted by the cluster controller within
// a second, had already been applied; the operator was locked out of the cluster for good,
// status "WRONGPASS").
func KeepsOperator(file, password string) bool {
	hash := "#" + sha256Hex(password)
	for _, l := range Lines(file) {
		if l.Name == OperatorUser {
			return slices.Contains(l.Rules, "on") && slices.Contains(l.Rules, hash)
		}
	}
	return false
}

// WithSetUsers returns file with the operator's user granted ACL SETUSER and DELUSER, as the
// ACL controller needs on a node where ACL LOAD is unsafe. The file is rendered for the image
// the cluster should run, so during an upgrade from Valkey 8 to 9 it lacks that grant while 8.x
// nodes still run: applied as it is, the first pass would take the operator's own SETUSER away
// on those nodes and leave them deaf to every later ACL change until replaced (measured: a
// password rotated during such a roll failed with NOPERM on every 8.x node). The grant is
// decided per node, by the version the node reports.
func WithSetUsers(file string) string {
	lines := strings.Split(file, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" || f[1] != OperatorUser {
			continue
		}
		for _, c := range []string{"+acl|setuser", "+acl|deluser"} {
			if !slices.Contains(f, c) {
				f = append(f, c)
			}
		}
		lines[i] = strings.Join(f, " ")
	}
	return strings.Join(lines, "\n")
}

// ForValkey8 returns file without the Valkey 9 names (operatorCommands9, the slot import rules) on the
// operator's and the replication user's lines: a cluster whose image is Valkey 9 may still run
// 8.x nodes in the middle of an upgrade, which refuse an unknown command in ACL SETUSER and move
// slots with the classic protocol only.
func ForValkey8(file string) string {
	drop := map[string]bool{}
	for _, c := range operatorCommands9 {
		drop["+"+c] = true
	}
	for _, r := range slices.Concat(slotImportGrants, slotImportCommands) {
		drop[r] = true
	}
	lines := strings.Split(file, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" || (f[1] != OperatorUser && f[1] != ReplicationUser) {
			continue
		}
		lines[i] = strings.Join(slices.DeleteFunc(f, func(t string) bool { return drop[t] }), " ")
	}
	return strings.Join(lines, "\n")
}

// EnforcesSlotImport reports whether a node's ACL LIST gives ReplicationUser the slot import rules:
// the node can be the target (or the source) of an atomic slot migration.
func EnforcesSlotImport(list []string) bool {
	root := func(normal string) string { // "on ; <passwords> ; <root rule> ; <selectors>..."
		parts := strings.Split(normal, " ; ")
		if len(parts) < 3 {
			return ""
		}
		return parts[2]
	}
	want := Normalize(strings.Join(slices.Concat([]string{"user", ReplicationUser}, ReplicationRule(true)), " "))
	got, ok := Normalize(strings.Join(list, "\n"))[ReplicationUser]
	return ok && root(got) == root(want[ReplicationUser])
}

// Line is one user line of an ACL file.
type Line struct {
	Name  string
	Rules []string
}

// Lines are the user lines of file, the operator's own last: applied one by one with ACL
// SETUSER, each is checked against the operator's rights as they are before it, so the
// operator's user changes only once every other user is set.
func Lines(file string) []Line {
	var out []Line
	var op *Line
	for _, line := range strings.Split(file, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		l := Line{Name: f[1], Rules: f[2:]}
		if l.Name == OperatorUser {
			op = &l
			continue
		}
		out = append(out, l)
	}
	if op != nil {
		out = append(out, *op)
	}
	return out
}

// MergeBindings returns the config-level bindings followed by the cluster's own, or the problem
// that makes them unusable (the cluster is Invalid with it as status.message): a username bound
// at both levels, with the original's message, or a pattern with a selector's bounds.
func MergeBindings(config, cluster []v1.ACLBinding) ([]v1.ACLBinding, string) {
	out := make([]v1.ACLBinding, 0, len(config)+len(cluster))
	seen := map[string]bool{}
	for _, b := range slices.Concat(config, cluster) {
		if seen[b.Username] {
			return nil, fmt.Sprintf("duplicate username %q in merged ACL bindings", b.Username)
		}
		// Admission refuses these; objects stored before it did are refused here, since a
		// parenthesis would end a selector early and move the rules after it into the root rule.
		for _, p := range b.Permissions {
			for _, k := range p.Keys {
				if strings.ContainsAny(k.Pattern, "()") {
					return nil, fmt.Sprintf("user %q: key pattern %q contains ( or ), which Valkey's ACL syntax reads as the bounds of a selector", b.Username, k.Pattern)
				}
			}
			for _, ch := range p.Channels {
				if strings.ContainsAny(ch, "()") {
					return nil, fmt.Sprintf("user %q: channel pattern %q contains ( or ), which Valkey's ACL syntax reads as the bounds of a selector", b.Username, ch)
				}
			}
		}
		seen[b.Username] = true
		out = append(out, b)
	}
	return out, ""
}

// Render renders the ACL file (see the rules at the top of this file). Passwords appear only
// as SHA-256 hashes.
func Render(bindings []v1.ACLBinding, roles map[string]v1.ValkeyRoleSpec, sys SystemUsers) string {
	var b strings.Builder
	bindsDefault := false
	for _, u := range bindings {
		bindsDefault = bindsDefault || u.Username == "default"
		fields := []string{"user", u.Username, "on", "resetpass"}
		for _, h := range u.PasswordHashes {
			fields = append(fields, "#"+h)
		}
		for i, p := range u.Permissions {
			rule := permissionRule(roles[p.RoleRef], p)
			if i == 0 {
				// After the reset (resetkeys resetchannels -@all), before the role's rules.
				fields = append(fields, rule[:3]...)
				for _, c := range clusterClientCommands {
					fields = append(fields, "+"+c)
				}
				fields = append(fields, rule[3:]...)
			} else {
				fields = append(fields, "("+strings.Join(rule, " ")+")")
			}
		}
		b.WriteString(strings.Join(fields, " ") + "\n")
	}
	switch {
	case len(bindings) == 0:
		b.WriteString("user default on nopass ~* &* +@all\n")
	case !bindsDefault:
		b.WriteString("user default off resetpass resetkeys resetchannels -@all\n")
	}
	pws := systemPasswords(sys)
	op := slices.Concat([]string{"user", OperatorUser, "on", "resetpass"}, pws[OperatorUser])
	opCommands := operatorCommands
	if sys.LegacyReplication {
		opCommands = slices.Concat(opCommands, []string{"psync", "replconf"})
	}
	if sys.SetUsers {
		opCommands = slices.Concat(opCommands, []string{"acl|setuser", "acl|deluser"})
	}
	if sys.Atomic {
		opCommands = slices.Concat(opCommands, operatorCommands9)
	}
	b.WriteString(strings.Join(slices.Concat(op, allowOnly(opCommands)), " ") + "\n")
	repl := slices.Concat([]string{"user", ReplicationUser, "on", "resetpass"}, pws[ReplicationUser], ReplicationRule(sys.Atomic && sys.SlotImport))
	b.WriteString(strings.Join(repl, " ") + "\n")
	if sys.MigratePassword != "" {
		// Every key, no channel: MIGRATE checks the caller's rights on the keys it moves.
		migrate := slices.Concat([]string{"user", MigrationUser, "on", "resetpass"}, pws[MigrationUser], []string{"resetchannels", "-@all", "~*"})
		for _, c := range migrationCommands {
			migrate = append(migrate, "+"+c)
		}
		b.WriteString(strings.Join(migrate, " ") + "\n")
	}
	return b.String()
}

// hashes are the password rules of a system user accepting every non-empty password of pws.
func hashes(pws ...string) []string {
	var out []string
	for _, pw := range pws {
		if pw != "" {
			out = append(out, "#"+sha256Hex(pw))
		}
	}
	return out
}

// SystemHashes are the password hashes ("#" and the SHA-256 in hex, sorted) each system user
// of sys accepts as Render renders it: what ACL GETUSER of that user on a node that enforces
// the file lists. A rotation of the system passwords compares them with each node's before it
// moves on (fsm.NodeRotation.Hashes).
func SystemHashes(sys SystemUsers) map[string][]string {
	out := systemPasswords(sys)
	for u := range out {
		slices.Sort(out[u])
		out[u] = slices.Compact(out[u])
	}
	return out
}

// systemPasswords are the password rules ("#" and the SHA-256 in hex) of each system user of
// sys, in the order Render writes them: its password, then the one it also accepts; the
// operator's user also takes the replication user's under LegacyReplication. The migration user
// is absent without a password.
func systemPasswords(sys SystemUsers) map[string][]string {
	op := hashes(sys.OperatorPassword, sys.OperatorAlso)
	if sys.LegacyReplication {
		op = append(op, hashes(sys.ReplPassword, sys.ReplAlso)...)
	}
	out := map[string][]string{OperatorUser: op, ReplicationUser: hashes(sys.ReplPassword, sys.ReplAlso)}
	if sys.MigratePassword != "" {
		out[MigrationUser] = hashes(sys.MigratePassword, sys.MigrateAlso)
	}
	return out
}

// allowOnly is a rule granting exactly commands on no key and no channel.
func allowOnly(commands []string) []string {
	out := []string{"resetkeys", "resetchannels", "-@all"}
	for _, c := range commands {
		out = append(out, "+"+c)
	}
	return out
}

// permissionRule is one permission as ACL rules: everything reset, the role's categories and
// commands in order, then its key and channel patterns. The same tokens serve the root rule and
// a selector.
func permissionRule(role v1.ValkeyRoleSpec, p v1.ACLPermission) []string {
	out := []string{"resetkeys", "resetchannels", "-@all"}
	for _, c := range role.Categories {
		out = append(out, aclSign(c.Access)+"@"+c.Name)
	}
	for _, c := range role.Commands {
		name := c.Name
		if c.Subcommand != "" {
			name += "|" + c.Subcommand
		}
		out = append(out, aclSign(c.Access)+name)
	}
	for _, k := range p.Keys {
		switch k.Access {
		case v1.KeyAccessRead:
			out = append(out, "%R~"+k.Pattern)
		case v1.KeyAccessWrite:
			out = append(out, "%W~"+k.Pattern)
		default:
			out = append(out, "~"+k.Pattern)
		}
	}
	for _, ch := range p.Channels {
		out = append(out, "&"+ch)
	}
	return out
}

func aclSign(a v1.RuleAccess) string {
	if a == v1.RuleDeny {
		return "-"
	}
	return "+"
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Normalize reads ACL rules, as the file renders them or as ACL LIST prints them, into one
// comparable form per username, so that what a node enforces can be compared with the file:
// Valkey rewrites rules when it loads them (it lowercases commands, drops resetkeys, adds
// sanitize-payload, prints key patterns before channels and commands, and keeps only the last
// rule about a command or category). Lines that are not user lines are ignored.
func Normalize(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		out[f[1]] = normalizeUser(f[2:])
	}
	return out
}

// aclPart is one rule set: a user's root rule or one of its selectors.
type aclPart struct {
	keys, channels, commands []string
}

func (p *aclPart) apply(tok string) {
	low := strings.ToLower(tok)
	switch {
	case low == "allkeys":
		p.keys = append(p.keys, "~*")
	case low == "resetkeys":
		p.keys = nil
	case low == "allchannels":
		p.channels = append(p.channels, "&*")
	case low == "resetchannels":
		p.channels = nil
	case low == "allcommands", low == "+@all":
		p.commands = []string{"+@all"}
	case low == "nocommands", low == "-@all":
		p.commands = []string{"-@all"}
	case strings.HasPrefix(tok, "~"), strings.HasPrefix(tok, "%"):
		p.keys = append(p.keys, strings.Replace(tok, "%RW~", "~", 1))
	case strings.HasPrefix(tok, "&"):
		p.channels = append(p.channels, tok)
	case strings.HasPrefix(low, "+"), strings.HasPrefix(low, "-"):
		// A later rule about the same command or category replaces the earlier one.
		p.commands = slices.DeleteFunc(p.commands, func(c string) bool { return c[1:] == low[1:] })
		p.commands = append(p.commands, low)
	}
}

func (p *aclPart) String() string {
	cmds := p.commands
	if len(cmds) == 0 || (cmds[0] != "+@all" && cmds[0] != "-@all") {
		cmds = append([]string{"-@all"}, cmds...)
	}
	keys := slices.Compact(slices.Sorted(slices.Values(p.keys)))
	chans := slices.Compact(slices.Sorted(slices.Values(p.channels)))
	return strings.Join(keys, " ") + " | " + strings.Join(chans, " ") + " | " + strings.Join(cmds, " ")
}

func normalizeUser(tokens []string) string {
	enabled, nopass := "off", false
	var hashes []string
	var root aclPart
	var selectors []string
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if strings.HasPrefix(tok, "(") {
			// A selector runs to the token that closes it.
			var sel aclPart
			for j := i; j < len(tokens); j++ {
				t := strings.TrimSuffix(strings.TrimPrefix(tokens[j], "("), ")")
				if t != "" {
					sel.apply(t)
				}
				if strings.HasSuffix(tokens[j], ")") {
					i = j
					break
				}
				i = j
			}
			selectors = append(selectors, "("+sel.String()+")")
			continue
		}
		switch low := strings.ToLower(tok); {
		case low == "on", low == "off":
			enabled = low
		case low == "nopass":
			nopass, hashes = true, nil
		case low == "resetpass":
			nopass, hashes = false, nil
		case strings.HasPrefix(tok, "#"):
			hashes = append(hashes, strings.ToLower(tok))
		case strings.HasPrefix(tok, ">"):
			hashes = append(hashes, "#"+sha256Hex(tok[1:]))
		case low == "reset":
			enabled, nopass, hashes, root, selectors = "off", false, nil, aclPart{}, nil
		case low == "clearselectors":
			selectors = nil
		case low == "sanitize-payload", low == "skip-sanitize-payload":
		default:
			root.apply(tok)
		}
	}
	pass := strings.Join(slices.Compact(slices.Sorted(slices.Values(hashes))), " ")
	if nopass {
		pass = "nopass"
	}
	return strings.Join(slices.Concat([]string{enabled, pass, root.String()}, selectors), " ; ")
}

// hashPattern finds SHA-256 hex digests, to keep them out of log lines (an ACL LOAD error may
// quote the line it refused).
var hashPattern = regexp.MustCompile(`[0-9a-fA-F]{64}`)

// ScrubHashes replaces every SHA-256 digest in s.
func ScrubHashes(s string) string { return hashPattern.ReplaceAllString(s, "[hash]") }
