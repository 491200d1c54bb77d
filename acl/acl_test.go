package acl

import (
	"maps"
	"strings"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

var (
	hashA = strings.Repeat("a", 64)
	hashB = strings.Repeat("b", 64)
)

func binding(user string, perms ...v1.ACLPermission) v1.ACLBinding {
	return v1.ACLBinding{Username: user, PasswordHashes: []string{sha256Hex(user + "-pw")}, Permissions: perms}
}

func perm(role string, keys ...v1.KeyPattern) v1.ACLPermission {
	return v1.ACLPermission{RoleRef: role, Keys: keys}
}

func keys(pattern string, access v1.KeyAccess) v1.KeyPattern {
	return v1.KeyPattern{Pattern: pattern, Access: access}
}

var testRoles = map[string]v1.ValkeyRoleSpec{
	"read":  {Categories: []v1.CategoryRule{{Name: "read", Access: v1.RuleAllow}}},
	"write": {Categories: []v1.CategoryRule{{Name: "write", Access: v1.RuleAllow}}},
	"read-write": {
		Categories: []v1.CategoryRule{{Name: "read", Access: v1.RuleAllow}, {Name: "write", Access: v1.RuleAllow}, {Name: "dangerous", Access: v1.RuleDeny}},
		Commands:   []v1.CommandRule{{Name: "cluster", Subcommand: "info", Access: v1.RuleAllow}, {Name: "flushall", Access: v1.RuleDeny}},
	},
}

var testSys = SystemUsers{OperatorPassword: "op-s3cret", ReplPassword: "repl-s3cret"}

func TestRenderACL(t *testing.T) {
	// No binding anywhere: the default user is open, the system users come last.
	got := Render(nil, nil, testSys)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 3 || lines[0] != "user default on nopass ~* &* +@all" ||
		!strings.HasPrefix(lines[1], "user _momento_operator ") || !strings.HasPrefix(lines[2], "user _momento_repl ") {
		t.Fatalf("no binding:\n%s", got)
	}
	if strings.Contains(got, "s3cret") {
		t.Fatalf("a password in the file:\n%s", got)
	}
	// Least privilege: no key, no channel, exactly the listed commands.
	if want := "user _momento_repl on resetpass #" + sha256Hex("repl-s3cret") + " resetkeys resetchannels -@all +psync +replconf +ping +role +cluster|failover"; lines[2] != want {
		t.Errorf("replication user:\n%s\nwant\n%s", lines[2], want)
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, "~") || strings.Contains(l, "&") || strings.Contains(l, "+@all") {
			t.Errorf("a system user may touch keys or channels, or run everything: %s", l)
		}
	}

	// The first permission is the root rule, each further one a selector of its own.
	b := []v1.ACLBinding{{Username: "app", PasswordHashes: []string{hashA, hashB}, Permissions: []v1.ACLPermission{
		perm("read", keys("a:*", v1.KeyAccessRead)),
		{RoleRef: "write", Keys: []v1.KeyPattern{keys("b:*", v1.KeyAccessReadWrite)}, Channels: []string{"orders:*"}},
	}}}
	got = Render(b, testRoles, testSys)
	want := "user app on resetpass #" + hashA + " #" + hashB + " resetkeys resetchannels -@all " +
		"+ping +cluster|slots +cluster|shards +cluster|nodes +cluster|info +cluster|myid +asking +readonly +readwrite +client|setname +client|setinfo " +
		"+@read %R~a:*" +
		" (resetkeys resetchannels -@all +@write ~b:* &orders:*)\n" +
		"user default off resetpass resetkeys resetchannels -@all\n"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("got:\n%s\nwant prefix:\n%s", got, want)
	}

	// Binding default replaces the switched-off line: a user may appear once in the file.
	b[0].Username = "default"
	if got = Render(b, testRoles, testSys); strings.Count(got, "user default ") != 1 || strings.Contains(got, "user default off") {
		t.Fatalf("bound default user:\n%s", got)
	}

	// Nodes started by an older operator replicate as the operator's user and PING with the
	// replication password: the operator's user keeps both until they are replaced.
	legacy := testSys
	legacy.LegacyReplication = true
	op := strings.Split(Render(nil, nil, legacy), "\n")[1]
	if !strings.Contains(op, "#"+sha256Hex("repl-s3cret")) || !strings.Contains(op, "+psync +replconf") {
		t.Fatalf("legacy operator user: %s", op)
	}
}

func TestMergeBindings(t *testing.T) {
	config := []v1.ACLBinding{binding("platform", perm("read"))}
	got, problem := MergeBindings(config, []v1.ACLBinding{binding("team", perm("read"))})
	if problem != "" || len(got) != 2 || got[0].Username != "platform" || got[1].Username != "team" {
		t.Fatalf("additive: %v %q", got, problem)
	}
	_, problem = MergeBindings(config, []v1.ACLBinding{binding("platform", perm("write"))})
	if problem != `duplicate username "platform" in merged ACL bindings` {
		t.Fatalf("collision: %q", problem)
	}
}

func TestNormalizeACL(t *testing.T) {
	// ACL LIST of valkey-server 8.0.1 for a file rendered like Render's.
	file := "user app on resetpass #" + hashA + " resetkeys resetchannels -@all +@read +GET -flushall +flushall %R~a:* &x (resetkeys resetchannels -@all +@write ~b:*)\n" +
		"user default off resetpass resetkeys resetchannels -@all\n"
	list := "user app on sanitize-payload #" + hashA + " %R~a:* resetchannels &x -@all +@read +get +flushall (~b:* resetchannels -@all +@write)\n" +
		"user default off sanitize-payload resetchannels -@all\n"
	if a, b := Normalize(file), Normalize(list); !maps.Equal(a, b) {
		t.Fatalf("same rules, different forms:\n%v\n%v", a, b)
	}
	for name, drift := range map[string]string{
		"password":  strings.Replace(list, "#"+hashA, "#"+hashB, 1),
		"key":       strings.Replace(list, "%R~a:*", "~a:*", 1),
		"command":   strings.Replace(list, "+flushall", "-flushall", 1),
		"selector":  strings.Replace(list, "+@write)", "+@write +@read)", 1),
		"enabled":   strings.Replace(list, "app on", "app off", 1),
		"extra":     list + "user intruder on nopass ~* +@all\n",
		"all again": strings.Replace(list, "-@all +@read", "+@all", 1),
	} {
		if maps.Equal(Normalize(file), Normalize(drift)) {
			t.Errorf("%s: drift not seen", name)
		}
	}
}

// TestWithSetUsers: a file rendered for Valkey 9 gets the operator's ACL SETUSER/DELUSER back
// for an 8.x node (an 8 -> 9 roll must not lock the operator out of the old nodes), once; the
// other users are untouched, and a file rendered for 8 is unchanged.
func TestWithSetUsers(t *testing.T) {
	sys := SystemUsers{OperatorPassword: "op", ReplPassword: "repl", MigratePassword: "mig"}
	nine := Render(nil, nil, sys)
	sys.SetUsers = true
	eight := Render(nil, nil, sys)
	if got := Normalize(WithSetUsers(nine)); !maps.Equal(got, Normalize(eight)) {
		t.Errorf("9.x file with the grant:\n%v\nwant what an 8.x cluster renders:\n%v", got, Normalize(eight))
	}
	if got := WithSetUsers(eight); got != eight {
		t.Errorf("an 8.x file changed:\n%s\nwas:\n%s", got, eight)
	}
	if a, b := Normalize(WithSetUsers(nine))[ReplicationUser], Normalize(nine)[ReplicationUser]; a != b {
		t.Errorf("replication user changed: %q, was %q", a, b)
	}
}

// TestMergeBindingsRefusesSelectorBounds: a pattern with ( or ) (stored before admission
// refused it) is a spec problem, never rendered: it would move later rules into the root rule.
func TestMergeBindingsRefusesSelectorBounds(t *testing.T) {
	b := v1.ACLBinding{Username: "w", Permissions: []v1.ACLPermission{
		{RoleRef: "all", Keys: []v1.KeyPattern{{Pattern: "scratch:*"}}},
		{RoleRef: "read", Keys: []v1.KeyPattern{{Pattern: "cache(*)"}}},
	}}
	_, problem := MergeBindings(nil, []v1.ACLBinding{b})
	if !strings.Contains(problem, `key pattern "cache(*)" contains ( or )`) {
		t.Fatalf("got %q", problem)
	}
	b.Permissions[1] = v1.ACLPermission{RoleRef: "read", Keys: []v1.KeyPattern{{Pattern: "c:*"}}, Channels: []string{"news)"}}
	if _, problem := MergeBindings([]v1.ACLBinding{b}, nil); !strings.Contains(problem, "channel pattern") {
		t.Fatalf("got %q", problem)
	}
}

// TestCheckCommands: a role naming a command Valkey lacks is a spec problem (a node would refuse
// the file, a new node abort at start); real commands and subcommands, in any case, pass.
func TestCheckCommands(t *testing.T) {
	ok := v1.ValkeyRoleSpec{Commands: []v1.CommandRule{{Name: "GET"}, {Name: "cluster", Subcommand: "info"}, {Name: "hgetdel"}, {Name: "flushall"}}}
	if problem := CheckCommands("ok", ok); problem != "" {
		t.Fatal(problem)
	}
	problem := CheckCommands("bad", v1.ValkeyRoleSpec{Commands: []v1.CommandRule{{Name: "get"}, {Name: "nosuchcmd"}}})
	if problem != `ValkeyRole "bad": unknown command "nosuchcmd" (neither Valkey 8.0 nor 9.1 has it)` {
		t.Fatalf("got %q", problem)
	}
	if problem := CheckCommands("bad", v1.ValkeyRoleSpec{Commands: []v1.CommandRule{{Name: "cluster", Subcommand: "nosuch"}}}); problem == "" {
		t.Fatal("unknown subcommand: no problem")
	}
}

// TestForValkey8: a file rendered for a Valkey 9 cluster with a reshard pending, stripped for an
// 8.x node, is what a cluster with neither renders: Valkey 8 refuses the names in ACL SETUSER.
func TestForValkey8(t *testing.T) {
	sys := SystemUsers{OperatorPassword: "op", ReplPassword: "repl", MigratePassword: "mig"}
	plain := Render(nil, nil, sys)
	sys.Atomic, sys.SlotImport = true, true
	nine := Render(nil, nil, sys)
	if maps.Equal(Normalize(nine), Normalize(plain)) {
		t.Fatal("the Valkey 9 file grants nothing more")
	}
	if got := Normalize(ForValkey8(nine)); !maps.Equal(got, Normalize(plain)) {
		t.Errorf("stripped:\n%v\nwant:\n%v", got, Normalize(plain))
	}
	sys.SlotImport = false
	if strings.Contains(Render(nil, nil, sys), "syncslots") {
		t.Error("the replication user has slot import rules with no reshard pending")
	}
}

// Every cluster's operator user may CONFIG SET, CONFIG GET and CLIENT KILL: the reload of a TLS
// cluster's certificate files, the detach of a replica it retires (valkey.Client.Detach), and the
// settings applied live, set and read back.
func TestRenderACLConfigSet(t *testing.T) {
	sys := SystemUsers{OperatorPassword: "op", ReplPassword: "repl", MigratePassword: "mig"}
	for _, l := range strings.Split(Render(nil, nil, sys), "\n") {
		if strings.HasPrefix(l, "user "+OperatorUser+" ") {
			if !strings.Contains(l, "+config|set") || !strings.Contains(l, "+config|get") || !strings.Contains(l, "+client|kill") {
				t.Errorf("operator user may not CONFIG SET, CONFIG GET or CLIENT KILL: %s", l)
			}
			return
		}
	}
	t.Fatal("no operator user")
}
