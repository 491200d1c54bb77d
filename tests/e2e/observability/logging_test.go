package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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

// secrets returns every operator credential the local cluster holds, to look for in logs.
func secrets(t *testing.T) []string {
	t.Helper()
	var list corev1.SecretList
	if err := harness.K8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if pw := string(s.Data["operator-password"]); strings.HasSuffix(s.Name, "-operator-auth") && pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// TestLogContract forms two same-named clusters in two namespaces with the real operator at
// RUST_LOG=info and checks every line it printed so far against the contract.
func TestLogContract(t *testing.T) {
	harness.Create(t, harness.NewImage("log-image"), harness.NewConfig("log-config", "log-image"))
	for _, ns := range []string{"log-a", "log-b"} {
		harness.SetupNamespace(t, ns)
		harness.Create(t, harness.NewCluster(ns, "my-cluster", "log-config", harness.WithShards(1), harness.WithReplicas(1)))
	}
	for _, ns := range []string{"log-a", "log-b"} {
		if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKey{Namespace: ns, Name: "my-cluster"}, v1.StateActive, harness.FormTimeout); err != nil {
			t.Fatal(err)
		}
	}
	stdout := harness.Op.Logs()
	lines := harness.ParseLog(t, stdout)
	if stderr, _ := os.ReadFile(harness.Op.Stderr); len(stderr) != 0 {
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
			t.Fatalf("RUST_LOG=info printed %s: %s", l.Level, l.Raw)
		}
		if strings.HasPrefix(l.Target, "operator") {
			want, ok := catalogue[l.Message()]
			if !ok {
				t.Fatalf("message not in the catalogue: %s", l.Raw)
			}
			if l.Level != want {
				t.Fatalf("%q at %s, the catalogue says %s", l.Message(), l.Level, want)
			}
		}
		// Reconcile-path events carry cluster_name and the span; the span names the namespace.
		if name, ok := l.Fields["cluster_name"]; ok {
			if l.Span == nil {
				t.Fatalf("cluster_name without a span: %s", l.Raw)
			}
			wantRef := fmt.Sprintf("ValkeyCluster.v1alpha1.valkey.gomomento.com/%s.", name)
			if !strings.HasPrefix(l.Ref(), wantRef) {
				t.Fatalf("span ref %q for cluster_name %v", l.Ref(), name)
			}
			for ns := range seen {
				if l.Ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster."+ns {
					seen[ns][l.Message()] = true
					if l.Message() == "cluster meet issued" {
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
	if err := harness.K8s.List(context.Background(), &events, client.InNamespace("valkey-operator")); err != nil {
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
	cmd := exec.CommandContext(ctx, harness.OperatorBinary, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
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
	t.Run("no Kubernetes client: plain text on stderr, exit 101, no JSON", func(t *testing.T) {
		stdout, stderr, code := runOperator(t, time.Minute, append(baseEnv(), "RUST_LOG=info", "KUBECONFIG=/nonexistent/kubeconfig", "HOME=/nonexistent"))
		if code != 101 || len(stdout) != 0 || !strings.HasPrefix(string(stderr), "failed to create Kubernetes client") || json.Valid(bytes.TrimSpace(stderr)) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("invalid DEFAULT_ZONE_SPREAD (the ConfigMap's defaultZoneSpread): one ERROR line, non-zero exit, even with RUST_LOG unset", func(t *testing.T) {
		stdout, stderr, code := runOperator(t, time.Minute, append(baseEnv(), "KUBECONFIG="+harness.Cluster.Kubeconfig, "DEFAULT_ZONE_SPREAD=strict"))
		lines := harness.ParseLog(t, stdout)
		if code == 0 || len(lines) != 1 || lines[0].Level != "ERROR" || lines[0].Fields["key"] != "DEFAULT_ZONE_SPREAD" || len(stderr) != 0 {
			t.Fatalf("exit %d, stdout %s, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("invalid RUST_LOG pieces: one plain line each on stderr, before any JSON", func(t *testing.T) {
		// A cluster to reconcile, so that the operator has something to say at DEBUG.
		harness.SetupNamespace(t, "rust-log")
		harness.Create(t, harness.NewCluster("rust-log", "vc", "no-such-config"))
		// Merge the two streams to check the order: the warnings come first.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.OperatorBinary, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
		cmd.Env = append(baseEnv(), "KUBECONFIG="+harness.Cluster.Kubeconfig, "RUST_LOG=debug,operator=loud,=info")
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
	harness.Create(t, harness.NewImage("verbosity-image"), harness.NewConfig("verbosity-config", "verbosity-image"))
	harness.Op.Kill(syscall.SIGTERM)
	t.Cleanup(func() {
		var err error
		if harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info"); err != nil {
			t.Fatal(err)
		}
	})
	for _, level := range []string{"warn", "off"} {
		op, err := harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator-"+level, "RUST_LOG="+level)
		if err != nil {
			t.Fatal(err)
		}
		ns := "verbosity-" + level
		harness.SetupNamespace(t, ns)
		harness.Create(t, harness.NewCluster(ns, "vc", "verbosity-config", harness.WithShards(1), harness.WithReplicas(0)))
		_, err = harness.WaitState(context.Background(), harness.K8s, client.ObjectKey{Namespace: ns, Name: "vc"}, v1.StateActive, harness.FormTimeout)
		op.Kill(syscall.SIGTERM)
		if err != nil {
			t.Fatal(err)
		}
		stderr, _ := os.ReadFile(op.Stderr)
		switch lines := harness.ParseLog(t, op.Logs()); level {
		case "warn":
			for _, l := range lines {
				if l.Level != "WARN" && l.Level != "ERROR" {
					t.Fatalf("RUST_LOG=warn printed %s", l.Raw)
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
	ns := "cred"
	ctx := context.Background()
	vc := harness.ActiveCluster(t, ns, 1, 0)
	creds := harness.Creds(t, vc)
	pods := harness.Pods(t, vc)
	if len(pods) != 1 {
		t.Fatalf("%d running pods, want 1", len(pods))
	}
	secretKey := client.ObjectKey{Namespace: ns, Name: "vc-operator-auth"}
	if err := harness.K8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // for the line and the status both
	harness.WaitFor(t, "a WARN line for the missing credential", time.Until(deadline), func() string {
		for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
			if l.Message() == logging.MsgCredentialMissing && l.Ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/vc."+ns {
				if l.Level != "WARN" || l.Fields["secret"] != secretKey.Name || l.Fields["key"] != "operator-password" {
					t.Fatalf("line: %s", l.Raw)
				}
				return ""
			}
		}
		return "none yet"
	})

	// Status says why, with Degraded True; the Secret stays missing (not regenerated).
	var got v1.ValkeyCluster
	harness.WaitFor(t, "status saying the credential is missing", time.Until(deadline), func() string {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == "CredentialMissing" &&
			strings.Contains(got.Status.Message, secretKey.Name) {
			return ""
		}
		return fmt.Sprintf("message %q, conditions %+v", got.Status.Message, got.Status.Conditions)
	})
	if strings.Contains(got.Status.Message, creds.Password) {
		t.Fatal("the password appears in status.message")
	}
	// Give the operator two more passes to do something wrong.
	harness.PassMark(t, vc)(2)
	if err := harness.K8s.Get(ctx, secretKey, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the credential Secret was recreated by the operator (get: %v)", err)
	}
	// The cluster keeps serving: the same pod, answering the original credentials.
	now := harness.Pods(t, vc)
	if len(now) != 1 || now[0].UID != pods[0].UID {
		t.Fatalf("pods changed while the credential was missing: %d running pods", len(now))
	}
	c, err := valkey.NewClient(harness.PodAddr(now[0]), creds)
	if err != nil {
		t.Fatalf("the node refuses the original credentials: %v", err)
	}
	defer c.Close()
	if info, err := c.ClusterInfo(ctx); err != nil || info["cluster_state"] != "ok" {
		t.Fatalf("cluster info: %v %v", info, err)
	}
	if logs := harness.Op.Logs(); bytes.Contains(logs, []byte(creds.Password)) {
		t.Fatal("a password appears in the log stream")
	}

	// The user recreates the Secret with the original password: the cluster recovers.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretKey.Name},
		Data: map[string][]byte{"operator-password": []byte(creds.Password)}}
	if err := harness.K8s.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	// The next tick (30 s) sees it.
	harness.WaitFor(t, "recovered after the Secret came back", time.Minute, func() string {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionFalse && got.Status.State == v1.StateActive {
			return ""
		}
		return fmt.Sprintf("message %q, conditions %+v", got.Status.Message, got.Status.Conditions)
	})
}

// TestChangedCredentialIsNamed changes the operator's password in its credential Secret by hand
// under a live cluster. The nodes hold only the hash of the password the cluster was created
// with, so they refuse the operator (WRONGPASS): status.message must name the Secret and its key
// (a break test found only "WRONGPASS" there), never either password, and the cluster keeps
// serving. Putting the original value back heals it.
func TestChangedCredentialIsNamed(t *testing.T) {
	ns := "cred-changed"
	ctx := context.Background()
	vc := harness.ActiveCluster(t, ns, 1, 0)
	creds := harness.Creds(t, vc)
	const chosen = "a-value-someone-typed-by-hand"
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: ns, Name: "vc-operator-auth"}
	if err := harness.K8s.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["operator-password"] = []byte(chosen)
	if err := harness.K8s.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	var got v1.ValkeyCluster
	harness.WaitFor(t, "status naming the Secret and key the node refuses", 2*time.Minute, func() string {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		m := got.Status.Message
		if strings.Contains(m, "WRONGPASS") && strings.Contains(m, "key operator-password of Secret vc-operator-auth") {
			return ""
		}
		return fmt.Sprintf("message %q", m)
	})
	t.Logf("status.message: %s", got.Status.Message)
	for _, pw := range []string{creds.Password, chosen} {
		if strings.Contains(got.Status.Message, pw) {
			t.Fatal("a password appears in status.message")
		}
		if bytes.Contains(harness.Op.Logs(), []byte(pw)) {
			t.Fatal("a password appears in the log stream")
		}
	}
	// The cluster keeps serving the original credentials meanwhile.
	c, err := valkey.NewClient(harness.PodAddr(harness.Pods(t, vc)[0]), creds)
	if err != nil {
		t.Fatalf("the node refuses the original credentials: %v", err)
	}
	defer c.Close()
	if info, err := c.ClusterInfo(ctx); err != nil || info["cluster_state"] != "ok" {
		t.Fatalf("cluster info: %v %v", info, err)
	}

	// The original value back: the message goes.
	if err := harness.K8s.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["operator-password"] = []byte(creds.Password)
	if err := harness.K8s.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "recovered once the original password is back", 2*time.Minute, func() string {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &got); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Status.Message, "WRONGPASS") && got.Status.State == v1.StateActive && got.Status.ReadyNodes == 1 {
			return ""
		}
		return fmt.Sprintf("state %s, message %q", got.Status.State, got.Status.Message)
	})
}
