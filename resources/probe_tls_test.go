package resources

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
)

// TestLivenessTLSBadSecret: the liveness probe of a TLS node must not depend on the mounted TLS
// Secret being valid. The Secret volume follows the Secret, so an update that leaves ca.crt
// missing, empty or garbage (the cluster goes Invalid and the running servers keep the
// certificate they loaded) reaches every pod within a kubelet sync. A probe that verifies the
// server with that ca.crt then fails on every node at once, and every pod of the cluster is
// killed (restartPolicy Never: replaced, empty). Break test: 5 of 6 nodes of a 3x1 died this
// way within 15 s of `kubectl apply` of a Secret without ca.crt.
func TestLivenessTLSBadSecret(t *testing.T) {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages`", err)
	}
	port := freePort(t)

	dir := t.TempDir()
	secretDir, tlsDir := filepath.Join(dir, "secret"), filepath.Join(dir, "tls")
	for _, d := range []string{secretDir, tlsDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca := tlstest.NewPKI(t, "ca")
	crt, key := ca.Issue(tlstest.Leaf{})
	write(filepath.Join(dir, "server.crt"), crt)
	write(filepath.Join(dir, "server.key"), key)
	write(filepath.Join(dir, "ca.crt"), ca.PEM)
	write(filepath.Join(secretDir, AuthFileName), []byte("masteruser default\nmasterauth x\n"))

	srv := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "no")
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	probe := func() (bool, string) {
		cmd := livenessProbe(tlsTestCluster()).Exec.Command
		script := strings.ReplaceAll(cmd[2], secretMountPath, secretDir)
		script = strings.ReplaceAll(script, TLSMountPath, tlsDir)
		script = strings.ReplaceAll(script, "-p "+strconv.Itoa(ClientPort), "-p "+strconv.Itoa(port))
		ctx, cancel := context.WithTimeout(t.Context(), livenessTimeoutSeconds*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, cmd[0], cmd[1], script).CombinedOutput()
		return err == nil, string(out)
	}

	// The mounted Secret as it was when the server started: the probe passes.
	write(filepath.Join(tlsDir, tlsmaterial.CAKey), ca.PEM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, out := probe()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TLS probe never passed against a running server: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The Secret updated with a bad ca.crt: the server still serves what it loaded, so it is
	// alive, and the probe must say so.
	other := tlstest.NewPKI(t, "another-ca")
	for name, data := range map[string][]byte{"another CA": other.PEM, "garbage": []byte("garbage\n"), "empty": {}} {
		write(filepath.Join(tlsDir, tlsmaterial.CAKey), data)
		if ok, out := probe(); !ok {
			t.Errorf("ca.crt %s in the mounted Secret: the probe failed against a live server (%q), so every pod would be killed", name, out)
		}
	}
	_ = os.Remove(filepath.Join(tlsDir, tlsmaterial.CAKey))
	if ok, out := probe(); !ok {
		t.Errorf("ca.crt missing from the mounted Secret: the probe failed against a live server (%q)", out)
	}
}
