package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
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

var testSys = acl.SystemUsers{OperatorPassword: "op-s3cret", ReplPassword: "repl-s3cret"}

func TestResolveACLAlongTheChain(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	img := &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: "8.0.1", Version: "8.0.1"}}
	cfg := func(name, base string, acl []v1.ACLBinding) *v1.ValkeyConfig {
		return &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyConfigSpec{BaseRef: base, ImageRef: "img", ACL: acl}}
	}
	role := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: "read"}, Spec: testRoles["read"]}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(img, role,
		cfg("base", "", []v1.ACLBinding{binding("base-user", perm("read"))}),
		cfg("inherits", "base", nil),
		cfg("replaces", "base", []v1.ACLBinding{binding("child-user", perm("read"))}),
	).Build()
	ctx := context.Background()
	for name, want := range map[string]string{"base": "base-user", "inherits": "base-user", "replaces": "child-user"} {
		rc, err := resolveConfig(ctx, c, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := usernames(rc.ACL); got != want {
			t.Errorf("%s: config-level users %q, want %q", name, got, want)
		}
	}
	// An explicit empty list (which only a client that sends acl: [] can write) clears.
	chain := []v1.ValkeyConfig{*cfg("clears", "base", []v1.ACLBinding{}), *cfg("base", "", []v1.ACLBinding{binding("base-user", perm("read"))})}
	if got := configACL(chain); got == nil || len(got) != 0 {
		t.Errorf("an explicit empty acl did not clear the base's: %v", got)
	}
	if _, err := resolveRoles(ctx, c, []v1.ACLBinding{binding("app", perm("read"), perm("gone"))}); err == nil ||
		err.Error() != `ValkeyRole "gone" not found (referenced by user "app")` {
		t.Fatalf("missing role: %v", err)
	}
}

func usernames(bindings []v1.ACLBinding) string {
	var users []string
	for _, b := range bindings {
		users = append(users, b.Username)
	}
	return strings.Join(users, ",")
}

// TestRenderedACLOnValkey loads a rendered file into a real valkey-server: it is accepted, ACL
// LIST normalises to the file, and the rules do what the bindings say (the selector case: read
// on a:* and write on b:* cannot write a:*; the system users touch no key).
func TestRenderedACLOnValkey(t *testing.T) {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages`", err)
	}
	port := freePort(t)
	dir := t.TempDir()
	bindings := []v1.ACLBinding{
		binding("split", perm("read", keys("a:*", v1.KeyAccessRead)), perm("write", keys("b:*", v1.KeyAccessReadWrite))),
		binding("rw", perm("read-write", keys("app:*", v1.KeyAccessReadWrite))),
	}
	sys := testSys
	sys.SetUsers = true
	file := acl.Render(bindings, testRoles, sys)
	aclPath := filepath.Join(dir, resources.ACLFileName)
	if err := os.WriteFile(aclPath, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--aclfile", aclPath)
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	connect := func(user, pw string) (*valkey.Client, error) {
		var c *valkey.Client
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if c, err = valkey.NewClient(addr, valkey.Credentials{Username: user, Password: pw}); err == nil || valkey.IsServerError(err) {
				return c, err
			}
		}
		return c, err
	}
	op, err := connect(acl.OperatorUser, testSys.OperatorPassword)
	if err != nil {
		t.Fatalf("the operator cannot connect: %v", err)
	}
	defer op.Close()
	ctx := context.Background()
	if err := op.ACLLoad(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := op.ACLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acl.Normalize(strings.Join(list, "\n")), acl.Normalize(file); !maps.Equal(got, want) {
		t.Fatalf("the node enforces something else than the file:\n%v\n%v", got, want)
	}

	run := func(user, pw string, args ...string) string {
		cmd := exec.Command("valkey-cli", append([]string{"--no-auth-warning", "--user", user, "-p", strconv.Itoa(port)}, args...)...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+pw)
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		user, pw string
		args     []string
		want     string
	}{
		{"split", "split-pw", []string{"SET", "b:1", "x"}, "OK"},
		{"split", "split-pw", []string{"GET", "a:1"}, ""},
		{"split", "split-pw", []string{"SET", "a:1", "x"}, "NOPERM"},
		{"split", "split-pw", []string{"GET", "c:1"}, "NOPERM"},
		{"rw", "rw-pw", []string{"SET", "app:1", "x"}, "OK"},
		{"rw", "rw-pw", []string{"GET", "app:1"}, "x"},
		{"rw", "rw-pw", []string{"SET", "other", "x"}, "NOPERM"},
		{"rw", "rw-pw", []string{"FLUSHALL"}, "NOPERM"},
		{"rw", "rw-pw", []string{"CLUSTER", "INFO"}, "ERR"}, // allowed, but not a cluster node
		{acl.OperatorUser, testSys.OperatorPassword, []string{"GET", "app:1"}, "NOPERM"},
		{acl.OperatorUser, testSys.OperatorPassword, []string{"SET", "app:1", "x"}, "NOPERM"},
		// CONFIG GET: the settings applied live are read back from every node (liveconf).
		{acl.OperatorUser, testSys.OperatorPassword, []string{"CONFIG", "GET", "maxmemory"}, "maxmemory"},
		{acl.OperatorUser, testSys.OperatorPassword, []string{"CONFIG", "RESETSTAT"}, "NOPERM"},
		{acl.OperatorUser, testSys.OperatorPassword, []string{"FLUSHALL"}, "NOPERM"},
		{acl.OperatorUser, testSys.OperatorPassword, []string{"CLIENT", "LIST"}, "NOPERM"},
		{acl.ReplicationUser, testSys.ReplPassword, []string{"GET", "app:1"}, "NOPERM"},
		{acl.ReplicationUser, testSys.ReplPassword, []string{"SET", "app:1", "x"}, "NOPERM"},
		{acl.ReplicationUser, testSys.ReplPassword, []string{"PING"}, "PONG"},
		{"default", "", []string{"PING"}, "NOAUTH"},
	} {
		if got := run(c.user, c.pw, c.args...); !strings.Contains(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("%s %v: %q, want %q", c.user, c.args, got, c.want)
		}
	}

	// Where ACL LOAD is unsafe (Valkey 8), setUsers reaches the same state: a user changed, one
	// removed, one set by hand reverted.
	admin := exec.Command("valkey-cli", "-p", strconv.Itoa(port), "--user", acl.OperatorUser, "--no-auth-warning", "ACL", "SETUSER", "intruder", "on", "nopass", "~*", "+@all")
	admin.Env = append(os.Environ(), "REDISCLI_AUTH="+testSys.OperatorPassword)
	if out, err := admin.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("acl setuser as the operator (Valkey 8 grant): %v %s", err, out)
	}
	next := acl.Render([]v1.ACLBinding{binding("split", perm("write", keys("b:*", v1.KeyAccessReadWrite)))}, testRoles, sys)
	current, err := op.ACLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUsers(ctx, op, next, acl.Normalize(strings.Join(current, "\n")), nil); err != nil {
		t.Fatal(err)
	}
	list, err = op.ACLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acl.Normalize(strings.Join(list, "\n")), acl.Normalize(next); !maps.Equal(got, want) {
		t.Fatalf("after setUsers the node enforces something else than the file:\n%v\n%v", got, want)
	}
}

// TestACLCatchUpDelay: while a node's file is behind, a second between loads for the first
// passes, then 5 s; the tick once it caught up; a new desired file starts over.
func TestACLCatchUpDelay(t *testing.T) {
	var r ACLReconciler
	for i := range aclCatchUpFastTries {
		if d := r.next("ns/vc", "v1", true); d != aclCatchUpFast {
			t.Fatalf("pass %d behind: %s, want %s", i, d, aclCatchUpFast)
		}
	}
	if d := r.next("ns/vc", "v1", true); d != aclCatchUpSlow {
		t.Fatalf("after %d passes behind: %s, want %s", aclCatchUpFastTries, d, aclCatchUpSlow)
	}
	if d := r.next("ns/vc", "v2", true); d != aclCatchUpFast {
		t.Fatalf("a new file: %s, want %s", d, aclCatchUpFast)
	}
	if d := r.next("ns/vc", "v2", false); d != TickInterval {
		t.Fatalf("caught up: %s, want the tick", d)
	}
}

// TestACLWarnOncePerTick: the same failure of a node is said at WARN once per tick; another
// error, or the same one a tick later, is said again; a gone pod is forgotten.
func TestACLWarnOncePerTick(t *testing.T) {
	var r ACLReconciler
	t0 := time.Now()
	for i, c := range []struct {
		err  string
		at   time.Duration
		want bool
	}{
		{"refused", 0, true}, {"refused", time.Second, false}, {"unknown command", 2 * time.Second, true},
		{"unknown command", 3 * time.Second, false}, {"unknown command", 2*time.Second + TickInterval, true},
	} {
		if got := r.warnDue("ns/vc/p", c.err, t0.Add(c.at)); got != c.want {
			t.Fatalf("case %d (%s at %s): warn %v, want %v", i, c.err, c.at, got, c.want)
		}
	}
	r.forgetWarnings("ns/vc", nil)
	if !r.warnDue("ns/vc/p", "unknown command", t0.Add(3*time.Second+TickInterval)) {
		t.Fatal("a forgotten pod's failure was not said again")
	}
}

// TestSlotImportRulesOnValkey9: on two real 9.1.2 primaries whose replication user is rendered
// with the slot import rules (a reshard pending), a replica syncs as that user, the operator's
// user runs CLUSTER MIGRATESLOTS and it succeeds with every key; acl.EnforcesSlotImport sees the rules. With the file rendered once the
// reshard is over, the node no longer enforces them, and the same migration back fails with
// NOPERM on the target: the rules are what it needs, and they are gone after it.
func TestSlotImportRulesOnValkey9(t *testing.T) {
	dir := os.Getenv("VALKEY9_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "valkey-operator", "valkey-9.1.2")
	}
	bin := filepath.Join(dir, "bin", "valkey-server")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Valkey 9 not found (%v): run `make packages`", err)
	}
	sys := testSys
	sys.MigratePassword = "mig-s3cret"
	sys.Atomic, sys.SlotImport = true, true
	wide := acl.Render(nil, nil, sys)
	sys.SlotImport = false
	narrow := acl.Render(nil, nil, sys)
	ctx := context.Background()
	type node struct {
		port int
		file string
		c    *valkey.Client
		id   string
	}
	var nodes []*node
	for range 3 {
		port := freePortPair(t)
		d := t.TempDir()
		n := &node{port: port, file: filepath.Join(d, resources.ACLFileName)}
		if err := os.WriteFile(n.file, []byte(wide), 0o600); err != nil {
			t.Fatal(err)
		}
		srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", d, "--aclfile", n.file, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
			"--masteruser", acl.ReplicationUser, "--masterauth", sys.ReplPassword)
		srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if n.c, err = valkey.NewClient(addr, valkey.Credentials{Username: acl.OperatorUser, Password: sys.OperatorPassword}); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.c.Close)
		if n.id, err = n.c.MyID(ctx); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	a, b, r := nodes[0], nodes[1], nodes[2]
	if err := a.c.AddSlotsRange(ctx, valkey.SlotRanges{{Start: 0, End: 8191}}); err != nil {
		t.Fatal(err)
	}
	if err := b.c.AddSlotsRange(ctx, valkey.SlotRanges{{Start: 8192, End: 16383}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{b, r} {
		if err := a.c.Meet(ctx, "127.0.0.1", n.port, n.port+10000); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ia, _ := a.c.ClusterInfo(ctx)
		ib, _ := b.c.ClusterInfo(ctx)
		ir, _ := r.c.ClusterInfo(ctx)
		if ia["cluster_state"] == "ok" && ib["cluster_state"] == "ok" && ir["cluster_known_nodes"] == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the three nodes did not form a cluster")
		}
	}
	// A replica of b syncs as the widened replication user: the rules must not take PSYNC away.
	if err := r.c.Replicate(ctx, b.id); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if info, _ := r.c.Info(ctx, "replication"); info["master_link_status"] == "up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not sync as the widened replication user")
		}
	}
	// Keys of several types in slot 0..100, written as the default user (open: no binding).
	keys := []string{"{b}", "{f}"} // slots 3300 and 3168: in the range that moves
	for _, k := range keys {
		for _, args := range [][]string{{"SET", "s" + k, "v"}, {"RPUSH", "l" + k, "a", "b"}, {"HSET", "h" + k, "f", "v"}, {"ZADD", "z" + k, "1", "m"}, {"XADD", "x" + k, "*", "f", "v"}} {
			if out, err := exec.Command(filepath.Join(dir, "bin", "valkey-cli"), append([]string{"-c", "-p", strconv.Itoa(a.port)}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v %s", args, err, out)
			}
		}
	}
	// Slots 0-4095 only: a primary that gives away its last slot turns replica.
	move := func(from, to *node) (valkey.SlotMigration9, error) {
		if err := from.c.MigrateSlots(ctx, valkey.SlotRanges{{Start: 0, End: 4095}}, to.id); err != nil {
			return valkey.SlotMigration9{}, err
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			jobs, err := from.c.SlotMigrations(ctx)
			if err != nil {
				return valkey.SlotMigration9{}, err
			}
			if len(jobs) > 0 && jobs[0].Terminal() {
				return jobs[0], nil
			}
		}
		return valkey.SlotMigration9{}, errors.New("no end within 30 s")
	}
	for _, n := range nodes[:2] {
		list, err := n.c.ACLList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !acl.EnforcesSlotImport(list) {
			t.Fatalf("port %d does not enforce the slot import rules: %v", n.port, list)
		}
	}
	j, err := move(a, b)
	if err != nil || j.State != "success" {
		t.Fatalf("migration with the slot import rules: %+v, %v", j, err)
	}
	for _, k := range keys {
		if out, _ := exec.Command(filepath.Join(dir, "bin", "valkey-cli"), "-p", strconv.Itoa(b.port), "EXISTS", "s"+k, "l"+k, "h"+k, "z"+k, "x"+k).Output(); strings.TrimSpace(string(out)) != "5" {
			t.Errorf("keys of %s on the target after the move: %q exist, want 5", k, out)
		}
	}
	// The reshard is over: the narrow file, loaded, drops the rules; a migration back fails.
	for _, n := range nodes[:2] {
		if err := os.WriteFile(n.file, []byte(narrow), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := n.c.ACLLoad(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := n.c.ACLList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if acl.EnforcesSlotImport(list) {
			t.Fatalf("port %d still enforces the slot import rules: %v", n.port, list)
		}
	}
	if j, err := move(b, a); err != nil || j.State == "success" {
		t.Fatalf("migration without the slot import rules: %+v, %v; want failed", j, err)
	}
}

// freePort is a TCP port free on 127.0.0.1 when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// freePortPair finds a port p with p and its cluster bus port p+10000 free on 127.0.0.1.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		if p+10000 > 65535 {
			continue
		}
		if bl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000))); err == nil {
			_ = bl.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// sha256Hex is a password's hash as an ACL file holds it.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
