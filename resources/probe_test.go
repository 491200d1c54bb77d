package resources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// runLiveness runs the pod's liveness command as a kubelet would, with the secret directory and
// port of a test server, and reports whether it passed within the probe's timeout.
func runLiveness(t *testing.T, secretDir string, port int) (bool, string) {
	t.Helper()
	cmd := livenessProbe(&v1.ValkeyCluster{}).Exec.Command
	script := strings.ReplaceAll(cmd[2], secretMountPath, secretDir)
	script = strings.ReplaceAll(script, "-p "+strconv.Itoa(ClientPort), "-p "+strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(t.Context(), livenessTimeoutSeconds*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], cmd[1], script)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	return err == nil, string(out)
}

// TestLivenessScript runs the liveness command against a real valkey-server whose replication
// user is as the operator renders it (the probe PINGs as that user): it passes while the server
// answers, also when the credentials are refused, and fails when nothing listens and when the
// server is stopped (hung). The password never reaches a command line.
func TestLivenessScript(t *testing.T) {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages`", err)
	}
	if _, err := exec.LookPath("valkey-cli"); err != nil {
		t.Fatalf("valkey-cli not found (%v): run `make packages`", err)
	}
	port := freePort(t)

	dir := t.TempDir()
	const password = "0123456789abcdef-liveness"
	sum := sha256.Sum256([]byte(password))
	writeAuth := func(pw string) {
		if err := os.WriteFile(filepath.Join(dir, AuthFileName), []byte("masteruser "+acl.ReplicationUser+"\nmasterauth "+pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeAuth(password)

	if ok, out := runLiveness(t, dir, port); ok {
		t.Fatalf("passed with nothing listening: %s", out)
	}

	srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--user", "default", "on", "nopass", "-@all", "--user", acl.ReplicationUser, "on", "#"+hex.EncodeToString(sum[:]), "resetkeys", "resetchannels", "-@all", "+ping", "+psync", "+replconf",
		"--user", "admin", "on", "#"+hex.EncodeToString(sum[:]), "~*", "&*", "+@all")
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, out := runLiveness(t, dir, port)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe never passed against a running server: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Authenticated: the default user may run nothing (PING replies NOPERM), so the probe passed
	// only because AUTH as the replication user succeeded; with a wrong password it falls back to the
	// default user and fails.
	writeAuth("wrong")
	if ok, out := runLiveness(t, dir, port); ok || !strings.Contains(out, "NOPERM") {
		t.Fatalf("passed without the replication credentials, or not for the expected reason: %q", out)
	}
	// A server that refuses every credential still answers: alive (NOAUTH).
	admin := exec.Command("valkey-cli", "--no-auth-warning", "--user", "admin", "-p", strconv.Itoa(port), "ACL", "SETUSER", "default", "off")
	admin.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
	if out, err := admin.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("acl setuser: %v %s", err, out)
	}
	if ok, out := runLiveness(t, dir, port); !ok {
		t.Fatalf("a server refusing the credentials is alive, but the probe failed: %q", out)
	}
	writeAuth(password)
	if ok, out := runLiveness(t, dir, port); !ok || strings.Contains(out, password) {
		t.Fatalf("authenticated PING failed or printed the password: %q", out)
	}

	// Full: maxclients reached (Valkey counts the cluster bus links in it too). The server answers
	// every new connection with an error and closes it: alive.
	hold, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	setMax := func(n int) {
		t.Helper()
		c := exec.Command("valkey-cli", "--no-auth-warning", "--user", "admin", "-p", strconv.Itoa(port), "CONFIG", "SET", "maxclients", strconv.Itoa(n))
		c.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
		if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("config set maxclients %d: %v %s", n, err, out)
		}
	}
	setMax(1)
	if out, _ := exec.Command("valkey-cli", "-p", strconv.Itoa(port), "PING").CombinedOutput(); !strings.Contains(string(out), "max number of clients") {
		t.Fatalf("the server is not full: PING says %q", out)
	}
	if ok, out := runLiveness(t, dir, port); !ok {
		t.Fatalf("a full server (maxclients reached) is alive, but the probe failed: %q", out)
	}
	_ = hold.Close()
	time.Sleep(200 * time.Millisecond) // the server sees the held connection gone
	setMax(10000)

	// Hung: the socket accepts, nothing answers. The probe must fail within its timeout.
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if ok, out := runLiveness(t, dir, port); ok {
		t.Fatalf("passed against a stopped server: %q", out)
	}
	if d := time.Since(start); d > (livenessTimeoutSeconds+2)*time.Second {
		t.Fatalf("the probe took %s", d)
	}
	_ = srv.Process.Signal(syscall.SIGCONT)
}

// TestPreStopScript runs the Valkey 8 preStop hook (with a 1 s delay and a 12 s limit) against
// real servers loaded with the ACL file the operator renders, and with the auth.conf it mounts
// (the replication user and its password): a primary without a replica goes after the delay; a
// primary with an online replica is held until it turns replica (handed over), or until the
// limit. The test's own commands run as an admin binding; the default user is off, so a hook
// that fails to authenticate cannot pass by falling back to it. The windows are wide (a
// process start under load took 1.6 s more than the delay, at load 25): each only has to tell
// the delay, a handover and the limit apart.
func TestPreStopScript(t *testing.T) {
	if _, err := exec.LookPath("valkey-server"); err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages`", err)
	}
	dir := t.TempDir()
	sys := acl.SystemUsers{OperatorPassword: "0123456789abcdef-operator", ReplPassword: "0123456789abcdef-prestop"}
	if err := os.WriteFile(filepath.Join(dir, AuthFileName), []byte("masteruser "+acl.ReplicationUser+"\nmasterauth "+sys.ReplPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const adminPassword = "admin-pw"
	admin := v1.ACLBinding{Username: "admin", PasswordHashes: []string{sha256Hex(adminPassword)},
		Permissions: []v1.ACLPermission{{RoleRef: "all", Keys: []v1.KeyPattern{{Pattern: "*"}}}}}
	file := acl.Render([]v1.ACLBinding{admin}, map[string]v1.ValkeyRoleSpec{
		"all": {Categories: []v1.CategoryRule{{Name: "all", Access: v1.RuleAllow}}},
	}, sys)
	a, b := startACLServer(t, file), startACLServer(t, file)
	try := func(port int, args ...string) (string, error) {
		c := exec.Command("valkey-cli", append([]string{"--no-auth-warning", "--user", "admin", "-p", strconv.Itoa(port)}, args...)...)
		c.Env = append(os.Environ(), "REDISCLI_AUTH="+adminPassword)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	cli := func(port int, args ...string) string {
		t.Helper()
		out, err := try(port, args...)
		if err != nil || strings.HasPrefix(out, "ERR") || strings.HasPrefix(out, "NOPERM") {
			t.Fatalf("valkey-cli %v: %v %s", args, err, out)
		}
		return out
	}
	// run runs the hook against port and returns how long it held, failing past 20 s.
	run := func(port int) time.Duration {
		t.Helper()
		script := strings.ReplaceAll(preStopScript(&v1.ValkeyCluster{}, 1, 12), secretMountPath, dir)
		script = strings.ReplaceAll(script, "-p "+strconv.Itoa(ClientPort), "-p "+strconv.Itoa(port))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "/bin/sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("preStop hook: %v %s", err, out)
		}
		return time.Since(start)
	}

	if d := run(a); d < time.Second || d > 5*time.Second {
		t.Errorf("a primary without replicas held %s, want the 1 s delay", d)
	}
	// Replication as the operator sets it up: masteruser / masterauth from auth.conf.
	for _, port := range []int{a, b} {
		cli(port, "CONFIG", "SET", "masteruser", acl.ReplicationUser)
		cli(port, "CONFIG", "SET", "masterauth", sys.ReplPassword)
	}
	cli(b, "REPLICAOF", "127.0.0.1", strconv.Itoa(a))
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(cli(a, "INFO", "replication"), "connected_slaves:1"); {
		if time.Now().After(deadline) {
			t.Fatal("the replica never connected")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Handed over 6 s in: the hook ends soon after.
	handover := make(chan error, 1)
	go func() {
		time.Sleep(6 * time.Second)
		_, err := try(b, "REPLICAOF", "NO", "ONE")
		if err == nil {
			_, err = try(a, "REPLICAOF", "127.0.0.1", strconv.Itoa(b))
		}
		handover <- err
	}()
	if d := run(a); d < 6*time.Second || d > 10*time.Second {
		t.Errorf("a primary handed over after 6 s held %s, want about 6 s", d)
	}
	if err := <-handover; err != nil {
		t.Fatal(err)
	}
	if d := run(a); d > 5*time.Second {
		t.Errorf("a replica held %s, want the 1 s delay", d)
	}
	// b is now a primary with a as its connected replica, and nobody hands it over.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(cli(b, "INFO", "replication"), "connected_slaves:1"); {
		if time.Now().After(deadline) {
			t.Fatal("the demoted primary never connected as a replica")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The limit is counted in whole seconds of `date +%s`: within a second short of it.
	if d := run(b); d < 11*time.Second || d > 15*time.Second {
		t.Errorf("a primary never handed over held %s, want the 12 s limit", d)
	}
}

// startACLServer starts a valkey-server on a free port with acl as its ACL file, and returns the
// port once it answers.
func startACLServer(t *testing.T, acl string) int {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("valkey-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--repl-diskless-sync-delay", "0", "--aclfile", filepath.Join(dir, "users.acl"))
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			_ = c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("valkey-server on %d never listened", port)
		}
	}
}
