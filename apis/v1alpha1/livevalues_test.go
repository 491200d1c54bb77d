package v1alpha1_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
)

// liveValue is one value of a setting applied live, and what admission does with it beside what
// Valkey does. stricter marks a value Valkey takes that admission refuses, on purpose (its
// reason); envRefused one admission takes that Valkey refuses for a reason of the node's, not of
// the value's syntax.
type liveValue struct {
	key, value string
	stricter   string
	envRefused string
}

// liveValues are the values tried: every bound of each setting (config.c of 8.0.1; 9.1.2 the
// same, which the test checks), each way it can be spelled, and what Valkey refuses.
var liveValues = []liveValue{
	{key: "maxmemory", value: "100mb"}, {key: "maxmemory", value: "100MB"}, {key: "maxmemory", value: "1k"},
	{key: "maxmemory", value: "1kb"}, {key: "maxmemory", value: "1G"}, {key: "maxmemory", value: "1gb"},
	{key: "maxmemory", value: "1b"}, {key: "maxmemory", value: "0"}, {key: "maxmemory", value: "0100"},
	{key: "maxmemory", value: "9999999999gb"},
	{key: "maxmemory", value: "-1"}, {key: "maxmemory", value: "1.5mb"}, {key: "maxmemory", value: "1tb"},
	{key: "maxmemory", value: "50%"}, {key: "maxmemory", value: "1e6"}, {key: "maxmemory", value: "1mb ", stricter: "a value is written without spaces around it"},
	{key: "maxmemory", value: "mb", stricter: "memtoull reads no digits as 0: a unit alone is a typo, not 'no limit'"},
	{key: "maxmemory", value: "", stricter: "an empty value reads as 0, no limit"},
	{key: "maxmemory", value: "99999999999gb", stricter: "memtoull does not check its multiplication: this runs as 15140462030378500096 bytes"},
	{key: "maxmemory", value: `"100mb"`, stricter: "the settings applied live are written without valkey.conf quotes"},
	{key: "maxmemory-policy", value: "allkeys-lru"}, {key: "maxmemory-policy", value: "ALLKEYS-LRU"},
	{key: "maxmemory-policy", value: "volatile-lfu"}, {key: "maxmemory-policy", value: "volatile-random"},
	{key: "maxmemory-policy", value: "volatile-ttl"}, {key: "maxmemory-policy", value: "allkeys-lfu"},
	{key: "maxmemory-policy", value: "allkeys-random"}, {key: "maxmemory-policy", value: "noeviction"},
	{key: "maxmemory-policy", value: "volatile-lru"},
	{key: "maxmemory-policy", value: "sometimes"}, {key: "maxmemory-policy", value: "allkeys-lrm"},
	{key: "maxmemory-policy", value: "allkeys-lru ", stricter: "a value is written without spaces around it"},
	{key: "maxmemory-samples", value: "1"}, {key: "maxmemory-samples", value: "64"}, {key: "maxmemory-samples", value: "10"},
	{key: "maxmemory-samples", value: "0"}, {key: "maxmemory-samples", value: "65"}, {key: "maxmemory-samples", value: "05"},
	{key: "maxmemory-samples", value: "-1"},
	{key: "hz", value: "0"}, {key: "hz", value: "1"}, {key: "hz", value: "500"}, {key: "hz", value: "100000"},
	{key: "hz", value: "2147483647"}, {key: "hz", value: "2147483648"}, {key: "hz", value: "-1"}, {key: "hz", value: "010"},
	{key: "timeout", value: "0"}, {key: "timeout", value: "300"}, {key: "timeout", value: "2147483647"},
	{key: "timeout", value: "2147483648"}, {key: "timeout", value: "-1"}, {key: "timeout", value: "+5"},
	{key: "timeout", value: "0300"}, {key: "timeout", value: "9999999999"},
	{key: "maxclients", value: "1"}, {key: "maxclients", value: "10000"}, {key: "maxclients", value: "0"},
	{key: "maxclients", value: "4294967296"}, {key: "maxclients", value: "-5"},
	{key: "maxclients", value: "10000000", envRefused: "more clients than the node's file-descriptor limit allows"},
	{key: "slowlog-log-slower-than", value: "-1"}, {key: "slowlog-log-slower-than", value: "0"},
	{key: "slowlog-log-slower-than", value: "999999999999999999"}, {key: "slowlog-log-slower-than", value: "-2"},
	{key: "slowlog-log-slower-than", value: "9223372036854775808"},
	{key: "slowlog-log-slower-than", value: "9223372036854775807", stricter: "64-bit bounds stop at 18 digits"},
	{key: "slowlog-max-len", value: "0"}, {key: "slowlog-max-len", value: "128"}, {key: "slowlog-max-len", value: "-1"},
	{key: "latency-monitor-threshold", value: "0"}, {key: "latency-monitor-threshold", value: "100"},
	{key: "latency-monitor-threshold", value: "-1"}, {key: "latency-monitor-threshold", value: "1.5"},
	{key: "lazyfree-lazy-eviction", value: "yes"}, {key: "lazyfree-lazy-eviction", value: "No"},
	{key: "lazyfree-lazy-eviction", value: "true"}, {key: "lazyfree-lazy-eviction", value: "1"},
	{key: "lazyfree-lazy-expire", value: "YES"}, {key: "lazyfree-lazy-expire", value: "y"},
}

// TestLiveValuesAdmittedAsValkeyTakesThem sends each value of liveValues to a real kube-apiserver
// (a ValkeyConfig, dry run) and to real valkey-server 8.0.1 and 9.1.2 (CONFIG SET, as the
// operator sends it: unquoted), and checks
// that admission refuses exactly what Valkey refuses, with the setting's message, but for the
// values marked otherwise: a value Valkey would refuse at CONFIG SET made every pass of every
// cluster on the config fail (issue 35). CheckDirective, the same rules in Go, says the same.
func TestLiveValuesAdmittedAsValkeyTakesThem(t *testing.T) {
	c := apiServer(t)
	servers := map[string]string{"8.0.1": valkeyServer8(t), "9.1.2": valkeyServer9(t)}
	cli := map[string]func(args ...string) (string, error){}
	for version, bin := range servers {
		cli[version] = startValkey(t, bin)
	}
	every := map[string]bool{}
	for _, v := range liveValues {
		every[v.key] = true
		t.Run(fmt.Sprintf("%s=%q", v.key, v.value), func(t *testing.T) {
			takes := map[string]bool{}
			for version, run := range cli {
				// What the operator sends: the value without valkey.conf's quotes.
				out, err := run("CONFIG", "SET", v.key, liveconf.Unquote(v.value))
				if err != nil {
					t.Fatalf("valkey-cli on %s: %v", version, err)
				}
				takes[version] = strings.TrimSpace(out) == "OK"
			}
			if takes["8.0.1"] != takes["9.1.2"] {
				t.Fatalf("Valkey 8.0.1 takes it: %v, 9.1.2: %v; the rule must say which", takes["8.0.1"], takes["9.1.2"])
			}
			valkeyTakes := takes["8.0.1"]
			admit := valkeyTakes
			switch {
			case v.stricter != "" && !valkeyTakes:
				t.Fatalf("marked stricter (%s) but Valkey refuses it too", v.stricter)
			case v.stricter != "":
				admit = false
			case v.envRefused != "" && valkeyTakes:
				t.Fatalf("marked refused by the node (%s) but Valkey takes it", v.envRefused)
			case v.envRefused != "":
				admit = true
			}
			obj := decode(t, config(fmt.Sprintf("  valkey:\n    %s: %q\n", v.key, v.value)))[0]
			err := c.Create(t.Context(), obj, client.DryRunAll)
			want := ""
			if !admit {
				_, want = v1alpha1.ValueRuleCEL(v.key)
			}
			checkAdmission(t, obj, err, want)
			if got := v1alpha1.CheckDirective(v.key, v.value); (got == nil) != admit {
				t.Errorf("CheckDirective = %v, admission admits: %v", got, admit)
			}
			t.Logf("Valkey takes it: %v; admitted: %v", valkeyTakes, admit)
		})
	}
	for _, k := range liveconf.Keys() {
		if !every[k] {
			t.Errorf("no value of the live setting %s is tried", k)
		}
		if rule, _ := v1alpha1.ValueRuleCEL(k); rule == "" {
			t.Errorf("the live setting %s has no rule on its value", k)
		}
	}
}

// TestBoundedDirectivesAtAdmission: the enable-*-command family admits no, in any case, and
// refuses yes and local with its own message; loadmodule is refused whatever its value. Valkey
// takes these from valkey.conf only (CONFIG SET refuses them), so admission is the only door.
func TestBoundedDirectivesAtAdmission(t *testing.T) {
	var cases []admissionCase
	for _, d := range []string{"enable-debug-command", "enable-module-command", "enable-protected-configs"} {
		_, msg := v1alpha1.ValueRuleCEL(d)
		if msg == "" {
			t.Fatalf("%s has no rule", d)
		}
		for _, v := range []string{"no", "NO"} {
			cases = append(cases, admissionCase{name: d + "=" + v, manifest: config(fmt.Sprintf("  valkey:\n    %s: %q\n", d, v))})
		}
		for _, v := range []string{"yes", "local", "LOCAL", `"yes"`} {
			cases = append(cases, admissionCase{name: d + "=" + v, manifest: config(fmt.Sprintf("  valkey:\n    %s: %q\n", d, v)), wantErr: msg})
		}
	}
	cases = append(cases, admissionCase{name: "loadmodule", manifest: config("  valkey:\n    loadmodule: /usr/lib/valkey/rejson.so\n"),
		wantErr: "valkey directive loadmodule cannot be set (a module is native code"})
	runAdmissionCases(t, cases)
}

// valkeyServer8 is the valkey-server 8.0.1 of the machine (TESTING.md).
func valkeyServer8(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Fatalf("valkey-server not found (%v): run `make packages`", err)
	}
	return bin
}

// valkeyServer9 is the valkey-server 9.1.2 of VALKEY9_DIR (make deps).
func valkeyServer9(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("VALKEY9_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "valkey-operator", "valkey-9.1.2")
	}
	bin := filepath.Join(dir, "bin", "valkey-server")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Valkey 9 not found (%v): run `make packages`", err)
	}
	return bin
}

// startValkey runs bin on a free loopback port for the test and returns a function that runs
// valkey-cli (beside bin, else the machine's) against it.
func startValkey(t *testing.T, bin string) func(args ...string) (string, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	cliBin := filepath.Join(filepath.Dir(bin), "valkey-cli")
	if _, err := os.Stat(cliBin); err != nil {
		cliBin = "valkey-cli"
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(cliBin, append([]string{"-p", port}, args...)...).CombinedOutput()
		return string(out), err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := run("PING")
		if err == nil && strings.TrimSpace(out) == "PONG" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer PING: %v %s", bin, err, out)
		}
	}
	return run
}
