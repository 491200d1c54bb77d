package valkey

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/slot"
)

// These tests run real valkey-server processes on 127.0.0.1. They are the
// evidence that the Client works against Valkey itself; the pure tests only
// prove the parsing.

// formTimeout bounds every wait on the cluster; TESTING.md measured 2 s to
// cluster_state:ok on this kind of machine.
const formTimeout = 30 * time.Second

type testServer struct {
	addr    string
	port    int
	busPort int
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been reaped
}

// requireValkeyServer fails the test, never skips it, when valkey-server is
// not installed: a missing binary must not turn the evidence green.
func requireValkeyServer(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages` to install valkey-server 8.0.1", err)
	}
	return path
}

// freePort returns a port nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts one cluster-enabled valkey-server in its own temporary
// directory and waits until it answers PING with creds. It is killed when
// the test ends, whether it passed or not.
func startServer(t *testing.T, creds Credentials, extra ...string) *testServer {
	t.Helper()
	bin := requireValkeyServer(t)
	s := &testServer{dir: t.TempDir(), port: freePort(t), busPort: freePort(t)}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	args := append([]string{
		"--cluster-enabled", "yes",
		"--port", strconv.Itoa(s.port),
		"--cluster-port", strconv.Itoa(s.busPort),
		"--bind", "127.0.0.1",
		"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--cluster-node-timeout", "2000",
		// A replica syncs at once instead of after the default 5 s.
		"--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(s.dir, "valkey.log"),
	}, extra...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start valkey-server: %v", err)
	}
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(s.dir, "valkey.log")); err == nil {
				t.Logf("log of %s:\n%s", s.addr, b)
			}
		}
	})
	eventually(t, 10*time.Second, "server "+s.addr+" answers PING", func(ctx context.Context) error {
		select {
		case <-s.exited:
			// Most likely another process took the port in between.
			t.Fatalf("valkey-server on %s exited early: %v", s.addr, s.cmd.ProcessState)
		default:
		}
		c, err := NewClient(s.addr, creds)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Ping(ctx)
	})
	return s
}

// kill stops the server with SIGKILL, as a crash would, and reaps it.
func (s *testServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// eventually polls cond until it returns nil, failing the test with the
// last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dial(t *testing.T, addr string, creds Credentials) *Client {
	t.Helper()
	c, err := NewClient(addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func views(addrs []string) func(ctx context.Context) []NodeView {
	return func(ctx context.Context) []NodeView { return Observe(ctx, addrs, Credentials{}) }
}

// TestIntegrationFormCluster forms a cluster of three primaries, one
// replica and one extra node with nothing but this package, then checks
// what Valkey reports through ParseClusterNodes, fails over, and forgets a
// dead node.
func TestIntegrationFormCluster(t *testing.T) {
	ctx := t.Context()
	const primaries = 3
	var servers []*testServer
	var clients []*Client
	var addrs []string
	ids := map[string]int{}
	for i := range 5 {
		s := startServer(t, Credentials{})
		c := dial(t, s.addr, Credentials{})
		id, err := c.MyID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		servers, clients, addrs = append(servers, s), append(clients, c), append(addrs, s.addr)
		ids[id] = i
	}
	idOf := make([]string, len(servers))
	for id, i := range ids {
		idOf[i] = id
	}
	replica, extra := 3, 4

	// Meet everyone from node 0, giving the bus port explicitly.
	for _, s := range servers[1:] {
		if err := clients[0].Meet(ctx, "127.0.0.1", s.port, s.busPort); err != nil {
			t.Fatal(err)
		}
	}
	spread := slot.EvenSpread(primaries)
	for i, r := range spread {
		if err := clients[i].AddSlotsRange(ctx, SlotRanges{r}); err != nil {
			t.Fatal(err)
		}
	}
	// REPLICATE needs the replica to know its primary: wait for the
	// handshake rather than sleeping.
	eventually(t, formTimeout, "replica to know its primary", func(ctx context.Context) error {
		entries, err := clients[replica].ClusterNodes(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(entries, func(e NodeEntry) bool { return e.ID == idOf[0] && !e.Handshake }) {
			return fmt.Errorf("primary %s not known yet", idOf[0])
		}
		return nil
	})
	if err := clients[replica].Replicate(ctx, idOf[0]); err != nil {
		t.Fatal(err)
	}

	observe := views(addrs)
	var final []NodeView
	eventually(t, formTimeout, "cluster_state:ok on every node", func(ctx context.Context) error {
		final = observe(ctx)
		for _, v := range final {
			switch {
			case !v.Reachable:
				return fmt.Errorf("%s unreachable: %w", v.Addr, v.Err)
			case !v.ClusterStateOK():
				return fmt.Errorf("%s: cluster_state %q", v.Addr, v.ClusterInfo["cluster_state"])
			case v.ClusterInfo["cluster_slots_assigned"] != strconv.Itoa(SlotCount):
				return fmt.Errorf("%s: %s slots assigned", v.Addr, v.ClusterInfo["cluster_slots_assigned"])
			case v.ClusterInfo["cluster_known_nodes"] != strconv.Itoa(len(servers)):
				return fmt.Errorf("%s: knows %s nodes", v.Addr, v.ClusterInfo["cluster_known_nodes"])
			}
			// Every node must also see the replica as a replica.
			i := slices.IndexFunc(v.Nodes, func(e NodeEntry) bool { return e.ID == idOf[replica] })
			if i < 0 || v.Nodes[i].Role != RoleReplica {
				return fmt.Errorf("%s does not see %s as a replica yet", v.Addr, idOf[replica])
			}
		}
		if !final[replica].ReplicaLinkUp() {
			return fmt.Errorf("replica link %q", final[replica].Replication["master_link_status"])
		}
		return nil
	})

	// Every node, parsed, tells the same story.
	for vi, v := range final {
		if v.ID != idOf[vi] {
			t.Errorf("view %d: id %s, want %s", vi, v.ID, idOf[vi])
		}
		if me, ok := v.Myself(); !ok || me.ID != v.ID || me.Port != servers[vi].port || me.BusPort != servers[vi].busPort {
			t.Errorf("view %d: myself entry %+v", vi, me)
		}
		if len(v.Nodes) != len(servers) {
			t.Fatalf("view %d: %d entries", vi, len(v.Nodes))
		}
		for _, e := range v.Nodes {
			i := ids[e.ID]
			want := SlotRanges(nil)
			wantRole := RolePrimary
			switch {
			case i < primaries:
				want = SlotRanges{spread[i]}
			case i == replica:
				wantRole = RoleReplica
			}
			if e.Role != wantRole || !slices.Equal(e.Slots, want) || e.Fail || e.PFail || e.Handshake || !e.Connected {
				t.Errorf("view %d, node %d: %+v; want role %s slots %v", vi, i, e, wantRole, want)
			}
			if e.Addr() != addrs[i] {
				t.Errorf("view %d, node %d: addr %s, want %s", vi, i, e.Addr(), addrs[i])
			}
			if wantPrimary := map[bool]string{true: idOf[0]}[i == replica]; e.PrimaryID != wantPrimary {
				t.Errorf("view %d, node %d: primary %q, want %q", vi, i, e.PrimaryID, wantPrimary)
			}
		}
		if got := Covered(v.Nodes); !slices.Equal(got, slot.All()) {
			t.Errorf("view %d: covered %v", vi, got)
		}
		if got := slot.Unassigned(Covered(v.Nodes)); got != nil {
			t.Errorf("view %d: unassigned %v", vi, got)
		}
	}
	if got := final[0].Replication["role"]; got != "master" {
		t.Errorf("node 0 role %q", got)
	}
	if got := final[replica].Replication["role"]; got != "slave" {
		t.Errorf("replica role %q", got)
	}
	if _, ok := final[replica].ReplicationOffset(); !ok {
		t.Errorf("replica has no replication offset: %v", final[replica].Replication)
	}
	// The version a slot move between two nodes depends on comes with the same INFO.
	for i, v := range final {
		if v.Version == "" || v.Version != v.Replication["valkey_version"] {
			t.Errorf("node %d: Version %q", i, v.Version)
		}
	}

	t.Run("read-only commands", func(t *testing.T) {
		n, err := clients[0].CountKeysInSlot(ctx, 0)
		if err != nil || n != 0 {
			t.Errorf("CountKeysInSlot = %d, %v", n, err)
		}
		info, err := clients[0].Info(ctx, "server")
		if err != nil || info["valkey_version"] == "" {
			t.Errorf("Info(server) = %v, %v", info["valkey_version"], err)
		}
		if all, err := clients[0].Info(ctx, ""); err != nil || all["role"] != "master" || all["cluster_enabled"] != "1" {
			t.Errorf("Info() role %q cluster_enabled %q, %v", all["role"], all["cluster_enabled"], err)
		}
		if both, err := clients[0].Info(ctx, "server", "replication"); err != nil || both["valkey_version"] == "" || both["role"] != "master" || both["cluster_enabled"] != "" {
			t.Errorf("Info(server, replication) version %q role %q cluster_enabled %q, %v", both["valkey_version"], both["role"], both["cluster_enabled"], err)
		}
	})

	t.Run("errors name the command and keep the server reply", func(t *testing.T) {
		err := clients[0].Replicate(ctx, strings.Repeat("0", 40))
		if err == nil || !strings.HasPrefix(err.Error(), "cluster replicate "+strings.Repeat("0", 40)+" on "+addrs[0]+": ") || !IsServerError(err) {
			t.Errorf("Replicate(unknown) = %v (server error %v)", err, IsServerError(err))
		}
		if err := clients[0].AddSlotsRange(ctx, SlotRanges{{Start: 0, End: 10}}); err == nil || !IsServerError(err) {
			t.Errorf("AddSlotsRange(taken slots) = %v", err)
		}
		if err := clients[0].AddSlotsRange(ctx, SlotRanges{{Start: 10, End: 5}}); err == nil || IsServerError(err) {
			t.Errorf("AddSlotsRange(invalid) = %v", err)
		}
		if err := clients[0].AddSlotsRange(ctx, nil); err != nil {
			t.Errorf("AddSlotsRange(nil) = %v", err)
		}
		if err := clients[0].Failover(ctx, "SOMETIMES"); err == nil {
			t.Error("Failover with an unknown mode succeeded")
		}
		if err := clients[0].Failover(ctx, FailoverForce); err == nil || !IsServerError(err) {
			t.Errorf("Failover on a primary = %v", err)
		}
		if err := clients[0].ACLLoad(ctx); err == nil || !strings.HasPrefix(err.Error(), "acl load on ") {
			t.Errorf("ACLLoad without aclfile = %v", err)
		}
		if err := clients[0].ConfigSet(ctx, map[string]string{"no-such-parameter": "1"}); err == nil ||
			!strings.HasPrefix(err.Error(), "config set no-such-parameter on ") {
			t.Errorf("ConfigSet(unknown) = %v", err)
		}
		if err := clients[0].ConfigSet(ctx, map[string]string{"maxmemory-policy": "noeviction", "cluster-node-timeout": "2000"}); err != nil {
			t.Errorf("ConfigSet = %v", err)
		}
	})

	t.Run("unreachable node is marked, not dropped", func(t *testing.T) {
		dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		got := Observe(ctx, []string{addrs[0], dead, addrs[1]}, Credentials{})
		if len(got) != 3 || got[0].Addr != addrs[0] || got[1].Addr != dead || got[2].Addr != addrs[1] {
			t.Fatalf("views out of order: %+v", got)
		}
		if !got[0].Reachable || !got[2].Reachable || got[0].Err != nil {
			t.Errorf("live nodes: %v %v", got[0].Err, got[2].Err)
		}
		if got[1].Reachable || got[1].Err == nil || !strings.Contains(got[1].Err.Error(), dead) || got[1].Nodes != nil {
			t.Errorf("dead node view: %+v", got[1])
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if v := Observe(cancelled, addrs[:1], Credentials{}); v[0].Reachable || !errors.Is(v[0].Err, context.Canceled) {
			t.Errorf("cancelled observe: %+v", v[0])
		}
	})

	t.Run("coordinated failover promotes the replica", func(t *testing.T) {
		if err := clients[replica].Failover(ctx, FailoverCoordinated); err != nil {
			t.Fatal(err)
		}
		eventually(t, formTimeout, "replica promoted and seen by all", func(ctx context.Context) error {
			for _, v := range observe(ctx) {
				if !v.Reachable {
					return v.Err
				}
				i := slices.IndexFunc(v.Nodes, func(e NodeEntry) bool { return e.ID == idOf[replica] })
				j := slices.IndexFunc(v.Nodes, func(e NodeEntry) bool { return e.ID == idOf[0] })
				if i < 0 || j < 0 {
					return fmt.Errorf("%s: nodes missing", v.Addr)
				}
				p, old := v.Nodes[i], v.Nodes[j]
				if p.Role != RolePrimary || !slices.Equal(p.Slots, SlotRanges{spread[0]}) ||
					old.Role != RoleReplica || old.PrimaryID != idOf[replica] {
					return fmt.Errorf("%s: new primary %+v, old %+v", v.Addr, p, old)
				}
			}
			return nil
		})
	})

	t.Run("forget a dead node everywhere", func(t *testing.T) {
		servers[extra].kill()
		gone := idOf[extra]
		for i, c := range clients[:extra] {
			if err := c.Forget(ctx, gone); err != nil {
				t.Fatalf("forget on node %d: %v", i, err)
			}
		}
		for i, c := range clients[:extra] {
			entries, err := c.ClusterNodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(entries, func(e NodeEntry) bool { return e.ID == gone }) {
				t.Errorf("node %d still lists %s", i, gone)
			}
		}
		if err := clients[0].Forget(ctx, idOf[0]); err == nil {
			t.Error("a node forgot itself")
		}
	})
}

const (
	opsPassword   = "s3cret-ops-pa55-7f1e"
	wrongPassword = "wr0ng-guess-pa55-91ab"
)

// TestIntegrationAuthAndACL runs a node whose default user is off and whose
// only user comes from an aclfile, and checks that auth, ACL LOAD and every
// error path work without a password ever reaching an error message.
func TestIntegrationAuthAndACL(t *testing.T) {
	ctx := t.Context()
	aclDir := t.TempDir()
	aclFile := filepath.Join(aclDir, "users.acl")
	writeACL := func(text string) {
		t.Helper()
		if err := os.WriteFile(aclFile, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeACL("user default off\nuser ops on >" + opsPassword + " ~* &* +@all\n")
	ops := Credentials{Username: "ops", Password: opsPassword}
	s := startServer(t, ops, "--aclfile", aclFile)

	var errs []error
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: want an error", what)
			return
		}
		errs = append(errs, err)
	}

	c := dial(t, s.addr, ops)
	if info, err := c.ClusterInfo(ctx); err != nil || info["cluster_state"] == "" {
		t.Fatalf("ClusterInfo as ops = %v, %v", info, err)
	}

	_, err := NewClient(s.addr, Credentials{Username: "ops", Password: wrongPassword})
	check("wrong password", err)
	if !IsWrongPass(err) {
		t.Errorf("IsWrongPass(%v) = false, want true", err)
	}
	_, err = NewClient(s.addr, Credentials{Password: wrongPassword})
	check("default user is off", err)
	if _, err = NewClient(s.addr, Credentials{}); err == nil {
		// HELLO without AUTH may be accepted; the first command is not.
		c, _ := NewClient(s.addr, Credentials{})
		err = c.Ping(ctx)
		c.Close()
	}
	check("no credentials", err)
	for _, v := range Observe(ctx, []string{s.addr}, Credentials{Username: "ops", Password: wrongPassword}) {
		if v.Reachable {
			t.Error("observe with a wrong password reached the node")
		}
		check("observe with wrong password", v.Err)
		if !IsWrongPass(v.Err) {
			t.Errorf("observe: IsWrongPass(%v) = false, want true", v.Err)
		}
	}
	if IsWrongPass(c.Replicate(ctx, strings.Repeat("a", 40))) {
		t.Error("IsWrongPass of an ERR reply = true")
	}
	check("replicate unknown", c.Replicate(ctx, strings.Repeat("a", 40)))
	check("config set masterauth with a bad parameter",
		c.ConfigSet(ctx, map[string]string{"masterauth": opsPassword, "no-such-parameter": opsPassword}))
	check("config set bad value", c.ConfigSet(ctx, map[string]string{"maxmemory": opsPassword}))

	// ACL LOAD picks up a new user without a restart.
	app := Credentials{Username: "app", Password: "app-pa55"}
	writeACL("user default off\nuser ops on >" + opsPassword + " ~* &* +@all\nuser app on >app-pa55 ~* +@read +ping +hello +client\n")
	if err := c.ACLLoad(ctx); err != nil {
		t.Fatal(err)
	}
	a := dial(t, s.addr, app)
	if err := a.Ping(ctx); err != nil {
		t.Errorf("ping as app after ACL LOAD: %v", err)
	}
	check("app may not run CLUSTER MEET", a.Meet(ctx, "127.0.0.1", 1, 0))

	// A broken file is refused as a whole; ops still works.
	writeACL("user default off\nuser ops on >" + opsPassword + " ~* &* +@all\nuser broken on >x +no-such-command\n")
	check("acl load of a broken file", c.ACLLoad(ctx))
	if err := dial(t, s.addr, ops).Ping(ctx); err != nil {
		t.Errorf("ops after a failed ACL LOAD: %v", err)
	}

	if s := fmt.Sprint(ops) + fmt.Sprintf("%#v %+v", ops, ops); strings.Contains(s, opsPassword) {
		t.Errorf("credentials print their password: %s", s)
	}
	for _, err := range errs {
		t.Logf("error: %v", err)
		for _, pw := range []string{opsPassword, wrongPassword} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error contains a password: %v", err)
			}
		}
	}
}

// TestIntegrationMigrateSlot moves one slot holding keys between the two
// primaries of a password-protected cluster, checking the open-slot
// entries that ParseClusterNodes reads on the way, and that MIGRATE
// authenticates at the target with the client's own credentials.
func TestIntegrationMigrateSlot(t *testing.T) {
	ctx := t.Context()
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte("user default off\nuser ops on >"+opsPassword+" ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ops := Credentials{Username: "ops", Password: opsPassword}
	src, dst := startServer(t, ops, "--aclfile", aclFile), startServer(t, ops, "--aclfile", aclFile)
	cs, cd := dial(t, src.addr, ops), dial(t, dst.addr, ops)
	if err := cs.Meet(ctx, "127.0.0.1", dst.port, dst.busPort); err != nil {
		t.Fatal(err)
	}
	spread := slot.EvenSpread(2)
	if err := cs.AddSlotsRange(ctx, SlotRanges{spread[0]}); err != nil {
		t.Fatal(err)
	}
	if err := cd.AddSlotsRange(ctx, SlotRanges{spread[1]}); err != nil {
		t.Fatal(err)
	}
	addrs := []string{src.addr, dst.addr}
	eventually(t, formTimeout, "two-node cluster ok", func(ctx context.Context) error {
		for _, v := range Observe(ctx, addrs, ops) {
			if !v.Reachable || !v.ClusterStateOK() || len(v.Nodes) != 2 {
				return fmt.Errorf("%s: reachable %v, state %q, %d nodes, %s",
					v.Addr, v.Reachable, v.ClusterInfo["cluster_state"], len(v.Nodes), fmt.Sprint(v.Err))
			}
		}
		return nil
	})
	srcID, _ := cs.MyID(ctx)
	dstID, _ := cd.MyID(ctx)

	// Keys with one hash tag share a slot; pick a tag the source serves.
	var tag string
	hashSlot := -1
	for i := 0; hashSlot < 0 || !spread[0].Contains(hashSlot); i++ {
		tag = "{m" + strconv.Itoa(i) + "}"
		n, err := cs.c.Do(ctx, cs.c.B().ClusterKeyslot().Key(tag).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		hashSlot = int(n)
	}
	const nKeys = 25
	for i := range nKeys {
		key := fmt.Sprintf("%skey-%d", tag, i)
		if err := cs.c.Do(ctx, cs.c.B().Set().Key(key).Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	if err := cd.SetSlotImporting(ctx, hashSlot, srcID); err != nil {
		t.Fatal(err)
	}
	if err := cs.SetSlotMigrating(ctx, hashSlot, dstID); err != nil {
		t.Fatal(err)
	}
	if me := myself(t, cs); !slices.Equal(me.Migrating, []SlotMigration{{hashSlot, dstID}}) {
		t.Errorf("source open slots: migrating %v importing %v", me.Migrating, me.Importing)
	}
	if me := myself(t, cd); !slices.Equal(me.Importing, []SlotMigration{{hashSlot, srcID}}) {
		t.Errorf("target open slots: migrating %v importing %v", me.Migrating, me.Importing)
	}

	for moved := 0; ; {
		keys, err := cs.GetKeysInSlot(ctx, hashSlot, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			if moved != nKeys {
				t.Fatalf("moved %d keys, want %d", moved, nKeys)
			}
			break
		}
		if err := cs.MigrateKeys(ctx, "127.0.0.1", dst.port, keys, 5*time.Second, false); err != nil {
			t.Fatal(err)
		}
		moved += len(keys)
	}
	if n, err := cd.CountKeysInSlot(ctx, hashSlot); err != nil || n != nKeys {
		t.Errorf("target holds %d keys of slot %d, %v", n, hashSlot, err)
	}
	if n, err := cs.CountKeysInSlot(ctx, hashSlot); err != nil || n != 0 {
		t.Errorf("source holds %d keys of slot %d, %v", n, hashSlot, err)
	}
	// A repeated MIGRATE of keys already moved is harmless (NOKEY).
	if err := cs.MigrateKeys(ctx, "127.0.0.1", dst.port, []string{tag + "key-0"}, 5*time.Second, true); err != nil {
		t.Errorf("MIGRATE of a moved key: %v", err)
	}

	for _, c := range []*Client{cd, cs} {
		if err := c.SetSlotNode(ctx, hashSlot, dstID); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]SlotRanges{
		srcID: slot.Subtract(SlotRanges{spread[0]}, SlotRanges{{Start: hashSlot, End: hashSlot}}),
		dstID: slot.Union(SlotRanges{spread[1]}, SlotRanges{{Start: hashSlot, End: hashSlot}}),
	}
	eventually(t, formTimeout, "both nodes agree the slot moved", func(ctx context.Context) error {
		for _, v := range Observe(ctx, addrs, ops) {
			if !v.Reachable {
				return v.Err
			}
			for _, e := range v.Nodes {
				if !slices.Equal(e.Slots, want[e.ID]) || len(e.Migrating)+len(e.Importing) > 0 {
					return fmt.Errorf("%s sees %s with slots %v, open %v %v", v.Addr, e.ID, e.Slots, e.Migrating, e.Importing)
				}
			}
		}
		return nil
	})

	// SETSLOT STABLE on a slot that is not open is a no-op, not an error.
	if err := cs.SetSlotStable(ctx, hashSlot); err != nil {
		t.Errorf("SetSlotStable: %v", err)
	}
	if v, err := cd.c.Do(ctx, cd.c.B().Get().Key(tag+"key-7").Build()).ToString(); err != nil || v != "7" {
		t.Errorf("GET on the target after migration = %q, %v", v, err)
	}
}

func myself(t *testing.T, c *Client) NodeEntry {
	t.Helper()
	entries, err := c.ClusterNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	me, ok := Myself(entries)
	if !ok {
		t.Fatal("no myself entry")
	}
	return me
}

// TestIntegrationDetach: a replica Detach was called on stays a member of the cluster that answers
// MOVED for its primary's slots, but its replication link goes down and stays down (its AUTH as
// DetachedUser fails), so its primary's WAIT no longer counts it.
func TestIntegrationDetach(t *testing.T) {
	ctx := t.Context()
	const replPassword = "s3cret-repl-pa55-0c2d"
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	users := "user default off\nuser ops on >" + opsPassword + " ~* &* +@all\nuser rep on >" + replPassword + " -@all +psync +replconf +ping\n"
	if err := os.WriteFile(aclFile, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	ops := Credentials{Username: "ops", Password: opsPassword}
	replicaOf := []string{"--aclfile", aclFile, "--masteruser", "rep", "--masterauth", replPassword}
	p, r := startServer(t, ops, replicaOf...), startServer(t, ops, replicaOf...)
	cp, cr := dial(t, p.addr, ops), dial(t, r.addr, ops)
	if err := cp.Meet(ctx, "127.0.0.1", r.port, r.busPort); err != nil {
		t.Fatal(err)
	}
	if err := cp.AddSlotsRange(ctx, SlotRanges{{Start: 0, End: slot.Count - 1}}); err != nil {
		t.Fatal(err)
	}
	pid, _ := cp.MyID(ctx)
	eventually(t, formTimeout, "the replica knows its primary", func(ctx context.Context) error {
		return cr.Replicate(ctx, pid)
	})
	link := func(ctx context.Context) string {
		info, err := cr.Info(ctx, "replication")
		if err != nil {
			return err.Error()
		}
		return info["master_link_status"]
	}
	eventually(t, formTimeout, "the replica's link up, the cluster ok", func(ctx context.Context) error {
		if l := link(ctx); l != "up" {
			return fmt.Errorf("master_link_status %q", l)
		}
		for _, v := range Observe(ctx, []string{p.addr, r.addr}, ops) {
			if !v.ClusterStateOK() {
				return fmt.Errorf("%s: cluster_state %q", v.Addr, v.ClusterInfo["cluster_state"])
			}
		}
		return nil
	})
	waitOne := func() int64 {
		if err := cp.c.Do(ctx, cp.c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		n, err := cp.c.Do(ctx, cp.c.B().Wait().Numreplicas(1).Timeout(500).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := waitOne(); n != 1 {
		t.Fatalf("before Detach: WAIT 1 counted %d replicas", n)
	}

	if err := cr.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two reconnection attempts of the replica's cron
	if l := link(ctx); l != "down" {
		t.Errorf("2.5 s after Detach: master_link_status %q, want down", l)
	}
	if n := waitOne(); n != 0 {
		t.Errorf("after Detach: WAIT 1 counted %d replicas, want 0", n)
	}
	if got, err := cr.c.Do(ctx, cr.c.B().ConfigGet().Parameter("cluster-replica-no-failover").Build()).AsStrMap(); err != nil || got["cluster-replica-no-failover"] != "yes" {
		t.Errorf("after Detach: cluster-replica-no-failover %v (%v), want yes: Valkey's election must not promote it", got, err)
	}
	err := cr.c.Do(ctx, cr.c.B().Set().Key("k").Value("w").Build()).Error()
	if err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Errorf("a write sent to the detached replica: %v, want MOVED to its primary", err)
	}
}

// ACL CAT and COMMAND LIST on a real node: the categories Valkey knows (all is not among them),
// and which command and subcommand names it knows, without case, one name per reply at most.
func TestIntegrationKnownNames(t *testing.T) {
	ctx := t.Context()
	s := startServer(t, Credentials{})
	c := dial(t, s.addr, Credentials{})
	cats, err := c.ACLCategories(ctx)
	if err != nil || !slices.Contains(cats, "read") || !slices.Contains(cats, "scripting") || slices.Contains(cats, "json") {
		t.Fatalf("ACL CAT: %v, %v", cats, err)
	}
	names := []string{"get", "GET", "cluster|info", "Cluster|Info", "nosuch", "cluster|nosuch", "cluster"}
	got, err := c.KnownCommands(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"get": true, "GET": true, "cluster|info": true, "Cluster|Info": true, "nosuch": false, "cluster|nosuch": false, "cluster": true}
	if !maps.Equal(got, want) {
		t.Errorf("known commands %v, want %v", got, want)
	}
	if _, err := c.KnownCommands(ctx, []string{"g*"}); err == nil {
		t.Error("a glob pattern was sent")
	}
	many := make([]string, 0, 150)
	for i := range 150 {
		many = append(many, fmt.Sprintf("nosuch%d", i))
	}
	if got, err := c.KnownCommands(ctx, many); err != nil || len(got) != 150 || got["nosuch149"] {
		t.Errorf("150 names in batches: %d, %v", len(got), err)
	}
}
