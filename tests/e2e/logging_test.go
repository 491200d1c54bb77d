package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

var (
	timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)
	targetRE    = regexp.MustCompile(`^[a-z][a-z0-9_]*(::[a-z][a-z0-9_]*)*$`)
	levels      = map[string]bool{"ERROR": true, "WARN": true, "INFO": true, "DEBUG": true, "TRACE": true}
)

// logLine is one decoded line with its top-level keys in the order printed.
type logLine struct {
	raw       string
	keys      []string
	Timestamp string         `json:"timestamp"`
	Level     string         `json:"level"`
	Target    string         `json:"target"`
	Fields    map[string]any `json:"fields"`
	Span      map[string]any `json:"span"`
	Spans     []any          `json:"spans"`
	fields    []string       // keys of fields, in order
}

// orderedKeys returns the keys of the JSON object in raw, in order.
func orderedKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// parseLog decodes every line of a log stream and checks the contract's shape: one JSON
// object per line, keys timestamp, level, fields, target (then span, spans inside a
// reconcile, and nothing else), the timestamp's exact form, level names, `::` targets,
// `message` first in fields, and span / spans together with spans == [span].
func parseLog(t testing.TB, data []byte) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		var l logLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", n, err, raw)
		}
		l.raw = string(raw)
		var err error
		if l.keys, err = orderedKeys(raw); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		var top struct {
			Timestamp string            `json:"timestamp"`
			Fields    json.RawMessage   `json:"fields"`
			Span      json.RawMessage   `json:"span"`
			Spans     []json.RawMessage `json:"spans"`
		}
		_ = json.Unmarshal(raw, &top)
		if l.fields, err = orderedKeys(top.Fields); err != nil {
			t.Fatalf("line %d: fields: %v\n%s", n, err, raw)
		}
		keys := strings.Join(l.keys, ",")
		switch keys {
		case "timestamp,level,fields,target":
			if l.Span != nil || l.Spans != nil {
				t.Fatalf("line %d: span without its keys", n)
			}
		case "timestamp,level,fields,target,span,spans":
			spanKeys, _ := orderedKeys(top.Span)
			if strings.Join(spanKeys, ",") != "object.reason,object.ref,name" || l.Span["name"] != "reconciling object" {
				t.Fatalf("line %d: span keys %v: %s", n, spanKeys, raw)
			}
			if len(top.Spans) != 1 || string(top.Spans[0]) != string(top.Span) {
				t.Fatalf("line %d: spans is not [span]: %s", n, raw)
			}
		default:
			t.Fatalf("line %d: top-level keys %s\n%s", n, keys, raw)
		}
		if !timestampRE.MatchString(top.Timestamp) {
			t.Fatalf("line %d: timestamp %q", n, top.Timestamp)
		}
		if !levels[l.Level] {
			t.Fatalf("line %d: level %q", n, l.Level)
		}
		if !targetRE.MatchString(l.Target) {
			t.Fatalf("line %d: target %q", n, l.Target)
		}
		if len(l.fields) == 0 || l.fields[0] != "message" {
			t.Fatalf("line %d: fields do not start with message: %s", n, raw)
		}
		for _, leaked := range []string{"controller", "controllerGroup", "controllerKind", "reconcileID", "namespace"} {
			if _, ok := l.Fields[leaked]; ok {
				t.Fatalf("line %d: controller-runtime's %q leaked into fields: %s", n, leaked, raw)
			}
		}
		out = append(out, l)
	}
	return out
}

func (l logLine) message() string { s, _ := l.Fields["message"].(string); return s }

func (l logLine) ref() string { s, _ := l.Span["object.ref"].(string); return s }

// secrets returns every operator credential the local cluster holds, to look for in logs.
func secrets(t *testing.T) []string {
	t.Helper()
	var list corev1.SecretList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if pw := string(s.Data["password"]); strings.HasSuffix(s.Name, "-operator-auth") && pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// TestLogContract forms two same-named clusters in two namespaces with the real operator at
// RUST_LOG=info and checks every line it printed so far against the contract.
func TestLogContract(t *testing.T) {
	lane(t)
	create(t, newImage("log-image"), newConfig("log-config", "log-image"))
	for _, ns := range []string{"log-a", "log-b"} {
		setupNamespace(t, ns)
		create(t, newCluster(ns, "my-cluster", "log-config", withShards(1), withReplicas(1)))
	}
	for _, ns := range []string{"log-a", "log-b"} {
		if _, err := harness.WaitState(context.Background(), k8s, client.ObjectKey{Namespace: ns, Name: "my-cluster"}, v1.StateActive, formTimeout); err != nil {
			t.Fatal(err)
		}
	}
	stdout := operator.Logs()
	lines := parseLog(t, stdout)
	if stderr, _ := os.ReadFile(operator.Stderr); len(stderr) != 0 {
		t.Fatalf("stderr is not empty with a valid RUST_LOG:\n%s", stderr)
	}

	catalogue := map[string]string{}
	for _, e := range logging.Catalogue {
		catalogue[e.Message] = strings.ToUpper(e.Level.String())
	}
	catalogue["transitioning to Bootstrapping"] = "INFO"
	seen := map[string]map[string]bool{"log-a": {}, "log-b": {}}
	meets := map[string]int{}
	for _, l := range lines {
		if l.Level == "DEBUG" || l.Level == "TRACE" {
			t.Fatalf("RUST_LOG=info printed %s: %s", l.Level, l.raw)
		}
		if strings.HasPrefix(l.Target, "operator") {
			want, ok := catalogue[l.message()]
			if !ok {
				t.Fatalf("message not in the catalogue: %s", l.raw)
			}
			if l.Level != want {
				t.Fatalf("%q at %s, the catalogue says %s", l.message(), l.Level, want)
			}
		}
		// Reconcile-path events carry cluster_name and the span; the span names the namespace.
		if name, ok := l.Fields["cluster_name"]; ok {
			if l.Span == nil {
				t.Fatalf("cluster_name without a span: %s", l.raw)
			}
			wantRef := fmt.Sprintf("ValkeyCluster.v1alpha1.valkey.gomomento.com/%s.", name)
			if !strings.HasPrefix(l.ref(), wantRef) {
				t.Fatalf("span ref %q for cluster_name %v", l.ref(), name)
			}
			for ns := range seen {
				if l.ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster."+ns {
					seen[ns][l.message()] = true
					if l.message() == "cluster meet issued" {
						meets[ns]++
					}
				}
			}
		}
	}
	for ns, msgs := range seen {
		for _, m := range []string{"transitioning to Bootstrapping", "creating headless Service", "creating Pod for node",
			"transitioning to Forming", "cluster meet issued", "cluster formed, transitioning to Active"} {
			if !msgs[m] {
				t.Errorf("%s/my-cluster: no %q line", ns, m)
			}
		}
		// Forming→Active is one line, not `cluster formed` then `transitioning to Active`.
		if msgs["transitioning to Active"] {
			t.Errorf("%s/my-cluster: Forming→Active logged %q besides the contract's one line", ns, "transitioning to Active")
		}
		// One `cluster meet issued` per node introduced (1x1: one), not one per pair.
		if meets[ns] > 1 {
			t.Errorf("%s/my-cluster: %d %q lines for the one node introduced", ns, meets[ns], "cluster meet issued")
		}
	}

	// The contract's own query: jq by cluster_name returns both namespaces' lines, and only
	// the span tells them apart.
	jq := exec.Command("jq", "-c", `select(.fields.cluster_name == "my-cluster") | .span["object.ref"]`)
	jq.Stdin = bytes.NewReader(stdout)
	out, err := jq.Output()
	if err != nil {
		t.Fatalf("jq: %v", err)
	}
	refs := map[string]int{}
	for _, r := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		refs[strings.Trim(r, `"`)]++
	}
	if len(refs) != 2 || refs["ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster.log-a"] == 0 || refs["ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster.log-b"] == 0 {
		t.Fatalf("jq by cluster_name gave refs %v", refs)
	}

	// No Kubernetes Events: not even leader election's "became leader" in the operator's
	// namespace, where nothing else of the suite runs.
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace("valkey-operator")); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 0 {
		t.Fatalf("the operator wrote Events: %s: %s", events.Items[0].Reason, events.Items[0].Message)
	}

	for _, pw := range secrets(t) {
		if bytes.Contains(stdout, []byte(pw)) {
			t.Fatal("an operator password appears in the log stream")
		}
	}
}

// runOperator runs the operator binary once with env until it exits or timeout passes,
// stdout and stderr captured to one stream in order when merged is true.
func runOperator(t *testing.T, timeout time.Duration, env []string) (stdout, stderr []byte, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	_ = cmd.Run()
	return o.Bytes(), e.Bytes(), cmd.ProcessState.ExitCode()
}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RUST_LOG=") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "KUBERNETES_") && !strings.HasPrefix(kv, "DEFAULT_ZONE_SPREAD=") {
			env = append(env, kv)
		}
	}
	return env
}

func TestStartupFailures(t *testing.T) {
	lane(t)
	t.Run("no Kubernetes client: plain text on stderr, exit 101, no JSON", func(t *testing.T) {
		stdout, stderr, code := runOperator(t, time.Minute, append(baseEnv(), "RUST_LOG=info", "KUBECONFIG=/nonexistent/kubeconfig", "HOME=/nonexistent"))
		if code != 101 || len(stdout) != 0 || !strings.HasPrefix(string(stderr), "failed to create Kubernetes client") || json.Valid(bytes.TrimSpace(stderr)) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("invalid DEFAULT_ZONE_SPREAD (the ConfigMap's defaultZoneSpread): one ERROR line, non-zero exit, even with RUST_LOG unset", func(t *testing.T) {
		stdout, stderr, code := runOperator(t, time.Minute, append(baseEnv(), "KUBECONFIG="+cluster.Kubeconfig, "DEFAULT_ZONE_SPREAD=strict"))
		lines := parseLog(t, stdout)
		if code == 0 || len(lines) != 1 || lines[0].Level != "ERROR" || lines[0].Fields["key"] != "DEFAULT_ZONE_SPREAD" || len(stderr) != 0 {
			t.Fatalf("exit %d, stdout %s, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("invalid RUST_LOG pieces: one plain line each on stderr, before any JSON", func(t *testing.T) {
		// A cluster to reconcile, so that the operator has something to say at DEBUG.
		setupNamespace(t, "rust-log")
		create(t, newCluster("rust-log", "vc", "no-such-config"))
		// Merge the two streams to check the order: the warnings come first.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
		cmd.Env = append(baseEnv(), "KUBECONFIG="+cluster.Kubeconfig, "RUST_LOG=debug,operator=loud,=info")
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		var merged bytes.Buffer
		cmd.Stdout, cmd.Stderr = &merged, &merged
		_ = cmd.Run()
		got := strings.SplitN(merged.String(), "\n", 3)
		want := []string{
			"ignoring `operator=loud`: error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5",
			"ignoring `=info`: invalid filter directive",
		}
		if len(got) < 3 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("first lines:\n%q\nwant\n%q", got, want)
		}
		// The valid piece (debug) still applies: DEBUG lines follow.
		if !strings.Contains(got[2], `"level":"DEBUG"`) {
			t.Fatalf("no DEBUG line after the warnings:\n%s", got[2][:min(len(got[2]), 2000)])
		}
	})
}

// TestVerbosity stops the suite's operator and runs one with RUST_LOG=warn, then one with
// RUST_LOG=off, each while it forms a cluster: warn prints no INFO, off prints nothing.
func TestVerbosity(t *testing.T) {
	lane(t)
	create(t, newImage("verbosity-image"), newConfig("verbosity-config", "verbosity-image"))
	operator.Kill(syscall.SIGTERM)
	t.Cleanup(func() {
		var err error
		if operator, err = harness.StartOperator(binary, cluster, workDir, "operator", "RUST_LOG=info"); err != nil {
			t.Fatal(err)
		}
	})
	for _, level := range []string{"warn", "off"} {
		op, err := harness.StartOperator(binary, cluster, workDir, "operator-"+level, "RUST_LOG="+level)
		if err != nil {
			t.Fatal(err)
		}
		ns := "verbosity-" + level
		setupNamespace(t, ns)
		create(t, newCluster(ns, "vc", "verbosity-config", withShards(1), withReplicas(0)))
		_, err = harness.WaitState(context.Background(), k8s, client.ObjectKey{Namespace: ns, Name: "vc"}, v1.StateActive, formTimeout)
		op.Kill(syscall.SIGTERM)
		if err != nil {
			t.Fatal(err)
		}
		stderr, _ := os.ReadFile(op.Stderr)
		switch lines := parseLog(t, op.Logs()); level {
		case "warn":
			for _, l := range lines {
				if l.Level != "WARN" && l.Level != "ERROR" {
					t.Fatalf("RUST_LOG=warn printed %s", l.raw)
				}
			}
		case "off":
			if len(lines) != 0 || len(stderr) != 0 {
				t.Fatalf("RUST_LOG=off printed %d lines, stderr %q", len(lines), stderr)
			}
		}
	}
}

// TestMissingCredentialIsLoggedByKeyName deletes the operator's credential Secret under a live
// cluster. The operator must not generate a new password (the nodes accept only the original):
// it logs a WARN naming the Secret and key (never a value), says so in status.message and a
// Degraded condition, and leaves the cluster serving. Recreating the Secret with the original
// password heals it.
func TestMissingCredentialIsLoggedByKeyName(t *testing.T) {
	lane(t)
	ns := "cred"
	ctx := context.Background()
	vc := activeCluster(t, ns, 1, 0)
	creds := operatorCreds(t, vc)
	pods := clusterPods(t, vc)
	if len(pods) != 1 {
		t.Fatalf("%d running pods, want 1", len(pods))
	}
	secretKey := client.ObjectKey{Namespace: ns, Name: "vc-operator-auth"}
	if err := k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	warned := 0
	for warned == 0 {
		for _, l := range parseLog(t, operator.Logs()) {
			if l.message() == logging.MsgCredentialMissing && l.ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/vc."+ns {
				if l.Level != "WARN" || l.Fields["secret"] != secretKey.Name || l.Fields["key"] != "password" {
					t.Fatalf("line: %s", l.raw)
				}
				warned++
			}
		}
		if warned == 0 && time.Now().After(deadline) {
			t.Fatal("no WARN line for the missing credential")
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Status says why, with Degraded True; the Secret stays missing (not regenerated).
	var got v1.ValkeyCluster
	for {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == "CredentialMissing" &&
			strings.Contains(got.Status.Message, secretKey.Name) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status does not say the credential is missing: message %q, conditions %+v", got.Status.Message, got.Status.Conditions)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if strings.Contains(got.Status.Message, creds.Password) {
		t.Fatal("the password appears in status.message")
	}
	// Give the operator two more passes to do something wrong.
	passMark(t, vc)(2)
	if err := k8s.Get(ctx, secretKey, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the credential Secret was recreated by the operator (get: %v)", err)
	}
	// The cluster keeps serving: the same pod, answering the original credentials.
	now := clusterPods(t, vc)
	if len(now) != 1 || now[0].UID != pods[0].UID {
		t.Fatalf("pods changed while the credential was missing: %d running pods", len(now))
	}
	c, err := valkey.NewClient(addr(now[0]), creds)
	if err != nil {
		t.Fatalf("the node refuses the original credentials: %v", err)
	}
	defer c.Close()
	if info, err := c.ClusterInfo(ctx); err != nil || info["cluster_state"] != "ok" {
		t.Fatalf("cluster info: %v %v", info, err)
	}
	if logs := operator.Logs(); bytes.Contains(logs, []byte(creds.Password)) {
		t.Fatal("a password appears in the log stream")
	}

	// The user recreates the Secret with the original password: the cluster recovers.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name},
		Data: map[string][]byte{"password": []byte(creds.Password)}}
	if err := k8s.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute) // the next tick (30 s) sees it
	for {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionFalse && got.Status.State == v1.StateActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered after the Secret came back: message %q, conditions %+v", got.Status.Message, got.Status.Conditions)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
