package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
	"github.com/gomomento/valkey-operator/valkey"
)

// testCA is a certificate authority made by a test (harness.CA).
type testCA = harness.CA

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	ca, err := harness.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// leaf issues a certificate for vc signed by ca, and returns tls.crt and tls.key as PEM.
func leaf(t testing.TB, ca *testCA, vc *v1.ValkeyCluster, o harness.LeafOptions) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Leaf(serviceHost(vc), o)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

var (
	tlsSecretData = harness.TLSSecretData
	servedCert    = harness.ServedCert
	serviceHost   = harness.ServiceHost
	podHost       = harness.PodHost
)

// tlsCluster creates, in a new namespace ns, an image, a config, a TLS Secret signed by a new CA
// and a TLS cluster of the given shape named vc, and waits until it is Active.
func tlsCluster(t testing.TB, ns string, shards, replicas int32, version ...string) (*v1.ValkeyCluster, *testCA) {
	t.Helper()
	setupNamespace(t, ns)
	img := newImage(ns + "-image")
	if len(version) > 0 {
		img.Spec.Tag, img.Spec.Version = version[0], version[0]
	}
	create(t, img, newConfig(ns+"-config", ns+"-image"))
	vc := newCluster(ns, "vc", ns+"-config", withShards(shards), withReplicas(replicas))
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
	ca := newTestCA(t, ns+"-ca")
	crt, key := leaf(t, ca, vc, harness.LeafOptions{})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: ns}, Type: corev1.SecretTypeTLS, Data: tlsSecretData(crt, key, ca)})
	create(t, vc)
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return got, ca
}

// tlsCreds are the operator's credentials for vc over TLS, trusting only ca and verifying each
// node under its pod's DNS name.
func tlsCreds(t testing.TB, vc *v1.ValkeyCluster, ca *testCA) valkey.Credentials {
	t.Helper()
	return harness.TLSCreds(operatorCreds(t, vc), vc, clusterPods(t, vc), ca.Roots())
}

// tlsClusterClient is a valkey-go cluster client seeded with the Service's name alone, resolving
// through the cluster DNS, trusting only roots and verifying every name it reaches (the Service,
// then the per-pod names nodes announce in CLUSTER SHARDS and redirects).
func tlsClusterClient(t testing.TB, vc *v1.ValkeyCluster, roots *x509.CertPool) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress:  []string{net.JoinHostPort(serviceHost(vc), "6379")},
		TLSConfig:    &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableCache: true, Dialer: *cluster.Dialer(),
	})
	if err != nil {
		t.Fatalf("TLS cluster client through the Service's name: %v", err)
	}
	return c
}

// verifyTLS checks a TLS cluster from outside: every node refuses plaintext, answers over TLS
// under its own name with cluster_state:ok and every slot assigned, every replica is synced,
// valkey-cli --tls works through the Service's name (and fails without the CA), and keys
// written through a hostname-verifying cluster client are read back through another.
// waitHostnames waits until every node knows every other by its pod's DNS name (TLS clients are
// redirected by hostname). A node announces its hostname in its own gossip, so a node that
// joined last is known by an empty one for a moment: once, at load 20–30 after a roll, longer
// than the step from Ready to here. How long that took is logged; it fails after 30 s.
func waitHostnames(t testing.TB, vc *v1.ValkeyCluster, addrs []string, creds valkey.Credentials) {
	t.Helper()
	start := time.Now()
	for {
		var problem string
		for _, v := range valkey.Observe(context.Background(), addrs, creds) {
			if !v.Reachable {
				problem = fmt.Sprintf("node %s unreachable over TLS: %v", v.Addr, v.Err)
				break
			}
			for _, e := range v.Nodes {
				if !strings.HasSuffix(e.Hostname, "."+serviceHost(vc)) {
					problem = fmt.Sprintf("node %s knows %s by hostname %q, want its pod's DNS name", v.Addr, e.ID, e.Hostname)
					break
				}
			}
			if problem != "" {
				break
			}
		}
		if problem == "" {
			if waited := time.Since(start); waited > time.Second {
				t.Logf("every node knew every hostname %s after the cluster was Ready and whole", waited.Round(100*time.Millisecond))
			}
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s, 30 s after the cluster was Ready and whole", problem)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func verifyTLS(t testing.TB, vc *v1.ValkeyCluster, ca *testCA, shards, replicas int) {
	t.Helper()
	ctx := context.Background()
	pods := clusterPods(t, vc)
	if want := shards * (replicas + 1); len(pods) != want {
		t.Fatalf("%d running pods, want %d", len(pods), want)
	}
	for _, p := range pods {
		if reply, err := plaintextPing(addr(p)); err == nil && strings.HasPrefix(reply, "+PONG") {
			t.Fatalf("node %s answered PING in plaintext: %q", p.Name, reply)
		}
	}
	creds := tlsCreds(t, vc, ca)
	var addrs []string
	for _, p := range pods {
		addrs = append(addrs, addr(p))
	}
	primaries := 0
	for _, v := range valkey.Observe(ctx, addrs, creds) {
		if !v.Reachable {
			t.Fatalf("node %s unreachable over TLS: %v", v.Addr, v.Err)
		}
		if !v.ClusterStateOK() || v.ClusterInfo["cluster_slots_assigned"] != "16384" || v.ClusterInfo["cluster_known_nodes"] != strconv.Itoa(len(pods)) {
			t.Fatalf("node %s: CLUSTER INFO %v", v.Addr, v.ClusterInfo)
		}
		me, _ := v.Myself()
		if me.Role == valkey.RolePrimary {
			primaries++
		} else if !v.ReplicaLinkUp() {
			waitLinkUp(t, v.Addr, creds)
		}
	}
	if primaries != shards {
		t.Fatalf("%d primaries, want %d", primaries, shards)
	}
	waitHostnames(t, vc, addrs, creds)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := cluster.CommandWithDNS("valkey-cli", "-h", serviceHost(vc), "-p", "6379", "--tls", "--cacert", caFile, "PING").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Fatalf("valkey-cli --tls --cacert through the Service's name: %v\n%s", err, out)
	}
	out, _ = cluster.CommandWithDNS("valkey-cli", "-h", serviceHost(vc), "-p", "6379", "--tls", "PING").CombinedOutput()
	if strings.TrimSpace(string(out)) == "PONG" {
		t.Fatalf("valkey-cli --tls without the cluster's CA got PONG: verification is off")
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	w := tlsClusterClient(t, vc, roots)
	defer w.Close()
	// Right after a roll, the node the client asks first may still list a shard whose primary
	// was just replaced: the client refreshes its topology on the error. Wait for the first
	// write, bounded, then every other one must succeed at once.
	first := time.Now()
	for err := error(nil); ; time.Sleep(200 * time.Millisecond) {
		if err = w.Do(ctx, w.B().Set().Key("tls:first").Value("1").Build()).Error(); err == nil {
			break
		}
		if time.Since(first) > 20*time.Second {
			t.Fatalf("first SET over TLS: %v", err)
		}
	}
	if d := time.Since(first); d > time.Second {
		t.Logf("first SET over TLS succeeded after %s", d.Round(time.Millisecond))
	}
	const n = 300
	for i := range n {
		key := fmt.Sprintf("tls:key:%d", i)
		if err := w.Do(ctx, w.B().Set().Key(key).Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatalf("SET %s over TLS: %v", key, err)
		}
	}
	r := tlsClusterClient(t, vc, roots)
	defer r.Close()
	for i := range n {
		key := fmt.Sprintf("tls:key:%d", i)
		if got, err := r.Do(ctx, r.B().Get().Key(key).Build()).ToString(); err != nil || got != strconv.Itoa(i) {
			t.Fatalf("GET %s over TLS: %q, %v", key, got, err)
		}
	}
}

// plaintextPing sends PING without TLS and returns the first line of the reply.
func plaintextPing(a string) (string, error) {
	conn, err := net.DialTimeout("tcp", a, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}

// TestTLS: a TLS-only 3×1 cluster forms with the docs' TLS-mode settings; clients reach it only
// over TLS, verifying hostnames through the cluster DNS.
func TestTLS(t *testing.T) {
	lane(t)
	for _, version := range []string{"8.0.1", localcluster.Valkey9Version} {
		t.Run(version, func(t *testing.T) { testTLS(t, "tls-"+strings.ReplaceAll(version, ".", "-"), version) })
	}
}

func testTLS(t *testing.T, ns, version string) {
	vc, ca := tlsCluster(t, ns, 3, 1, version)
	checkHostnames(t, vc, ca)
	before := strings.Join(podNames(t, vc), ",")
	verifyTLS(t, vc, ca, 3, 1)
	if vc.Status.Message != "" {
		t.Errorf("status.message %q on a healthy TLS cluster", vc.Status.Message)
	}
	// The liveness probe PINGs over TLS: a probe that could not would fail three times in a row
	// (5 s apart) and the kubelet would kill the pod. Every pod is still the one it was.
	time.Sleep(20 * time.Second)
	if after := strings.Join(podNames(t, vc), ","); after != before {
		t.Fatalf("pods changed while idle (liveness over TLS?): %s, then %s", before, after)
	}
}

// checkHostnames: as soon as the cluster is Active, every node lists every peer with its
// hostname (CLUSTER NODES): one that did not would send clients to "?" in MOVED and ASK replies
// (Valkey gossips hostnames apart from the rest of a node's record, valkey-io/valkey#304).
func checkHostnames(t *testing.T, vc *v1.ValkeyCluster, ca *testCA) {
	t.Helper()
	var addrs []string
	for _, p := range clusterPods(t, vc) {
		addrs = append(addrs, addr(p))
	}
	for _, v := range valkey.Observe(context.Background(), addrs, tlsCreds(t, vc, ca)) {
		if !v.Reachable {
			t.Errorf("%s does not answer: %v", v.Addr, v.Err)
			continue
		}
		for _, e := range v.Nodes {
			if e.Hostname == "" {
				t.Errorf("%s, Active: knows %s (%s) without its hostname", v.Addr, e.ID, e.Addr())
			}
		}
	}
}

// setTLSData replaces the data of vc's TLS Secret.
func setTLSData(t *testing.T, vc *v1.ValkeyCluster, data map[string][]byte) {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: "vc-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data = data
	if err := k8s.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
}

// waitInvalid waits for state Invalid with exactly message, and for the TLS validation line with
// the same reason in the operator's log.
func waitInvalid(t *testing.T, vc *v1.ValkeyCluster, message string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var cur v1.ValkeyCluster
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.State == v1.StateInvalid && cur.Status.Message == message {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s, message %q; want Invalid with %q", cur.Status.State, cur.Status.Message, message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() == "TLS Secret validation failed, setting cluster Invalid" && strings.HasSuffix(l.ref(), "."+vc.Namespace) &&
			l.Fields["reason"] == message && l.Fields["cluster_name"] == vc.Name && l.Target == "operator::controller::tls" {
			return
		}
	}
	t.Fatalf("no TLS validation line with reason %q", message)
}

// checkServing checks that every node still answers over TLS with cluster_state:ok, trusting
// only ca.
func checkServing(t *testing.T, vc *v1.ValkeyCluster, ca *testCA) {
	t.Helper()
	creds := tlsCreds(t, vc, ca)
	var addrs []string
	for _, p := range clusterPods(t, vc) {
		addrs = append(addrs, addr(p))
	}
	for _, v := range valkey.Observe(context.Background(), addrs, creds) {
		if !v.Reachable || !v.ClusterStateOK() {
			t.Fatalf("node %s while the Secret is bad: reachable %v, %v, CLUSTER INFO %v", v.Addr, v.Reachable, v.Err, v.ClusterInfo)
		}
	}
}

// TestTLSInvalidSecret: a TLS Secret that breaks (in place, or by naming one that does not exist)
// makes a running cluster Invalid with the exact reason, while its nodes keep serving the
// certificate they loaded; a fixed Secret brings it back to Active by itself, no pod replaced.
func TestTLSInvalidSecret(t *testing.T) {
	lane(t)
	vc, ca := tlsCluster(t, "tls-invalid", 2, 1)
	before := strings.Join(podNames(t, vc), ",")
	var good corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: vc.Namespace, Name: "vc-tls"}, &good); err != nil {
		t.Fatal(err)
	}
	other := newTestCA(t, "other-ca")
	noWildcard, nwKey := leaf(t, ca, vc, harness.LeafOptions{DNSNames: []string{serviceHost(vc)}})
	foreign, foreignKey := leaf(t, other, vc, harness.LeafOptions{})
	noCA := map[string][]byte{"tls.crt": good.Data["tls.crt"], "tls.key": good.Data["tls.key"]}
	cases := []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"no ca.crt", noCA, `TLS Secret "vc-tls" missing required key "ca.crt"`},
		{"not PEM", tlsSecretDataRaw([]byte("garbage"), good.Data["tls.key"], ca.PEM), `TLS Secret "vc-tls": tls.crt is not valid PEM`},
		{"no wildcard", tlsSecretData(noWildcard, nwKey, ca), `TLS cert in Secret "vc-tls" missing SAN "*.` + serviceHost(vc) + `"`},
		{"another CA", tlsSecretData(foreign, foreignKey, ca), `TLS cert in Secret "vc-tls" is not signed by a CA in ca.crt`},
	}
	for _, c := range cases {
		setTLSData(t, vc, c.data)
		waitInvalid(t, vc, c.want)
		checkServing(t, vc, ca)
	}
	// A missing Secret, by naming one that does not exist; naming the good one again brings the
	// cluster back without replacing a node (the nodes mount that one).
	setTLSData(t, vc, good.Data)
	patchTLSRef(t, vc, "absent-tls")
	waitInvalid(t, vc, `TLS Secret "absent-tls" not found in namespace "`+vc.Namespace+`"`)
	checkServing(t, vc, ca)
	patchTLSRef(t, vc, "vc-tls")
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Message != "" {
		t.Errorf("status.message %q after the Secret was fixed", got.Status.Message)
	}
	if after := strings.Join(podNames(t, vc), ","); after != before {
		t.Fatalf("pods replaced by a bad Secret: %s, then %s", before, after)
	}
	verifyTLS(t, got, ca, 2, 1)
}

func tlsSecretDataRaw(certPEM, keyPEM, caPEM []byte) map[string][]byte {
	return map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM}
}

func patchTLSRef(t *testing.T, vc *v1.ValkeyCluster, name string) {
	t.Helper()
	var cur v1.ValkeyCluster
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.TLS.SecretRef = name
	if err := k8s.Patch(context.Background(), &cur, patch); err != nil {
		t.Fatal(err)
	}
}

// waitServing waits until every node of vc serves the leaf certPEM (compared byte for byte),
// verified against roots under its pod's DNS name, and returns how long that took from since.
func waitServing(t *testing.T, vc *v1.ValkeyCluster, certPEM []byte, roots *x509.CertPool, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	deadline := time.Now().Add(timeout)
	for {
		pending := map[string]string{}
		for _, p := range clusterPods(t, vc) {
			c, err := servedCert(addr(p), podHost(vc, p.Name), roots)
			switch {
			case err != nil:
				pending[p.Name] = err.Error()
			case !bytes.Equal(c.Raw, block.Bytes):
				pending[p.Name] = "serves " + c.Subject.CommonName + " serial " + c.SerialNumber.String()
			}
		}
		if len(pending) == 0 {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes not serving the new certificate after %s: %v", timeout, pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rotationTimeout bounds a wait for every node to serve a rotated certificate: the local
// kubelet's volume resync (2 s) and one 30 s tick, with room for a loaded machine. The time
// itself is measured by BenchmarkTLSRotation.
const rotationTimeout = 45 * time.Second

// TestTLSRotation rotates the leaf in place, then the CA through a two-CA bundle, under
// continuous TLS writes: every node serves each new certificate (by fingerprint, verified under
// its name), no pod is replaced, no write is refused and none is lost.
func TestTLSRotation(t *testing.T) {
	lane(t)
	vc, ca1 := tlsCluster(t, "tls-rotate", 3, 1)
	before := strings.Join(podNames(t, vc), ",")
	ca2 := newTestCA(t, "tls-rotate-ca2")
	// Clients trust both CAs for the whole test, as a team rotating its CA would first make them.
	both := x509.NewCertPool()
	both.AddCert(ca1.Cert)
	both.AddCert(ca2.Cert)
	opts := harness.WriterOptions{Addrs: []string{net.JoinHostPort(serviceHost(vc), "6379")}, Prefix: "rot", TLS: &tls.Config{RootCAs: both, MinVersion: tls.VersionTLS12}, Dialer: cluster.Dialer()}
	w, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WaitAcked(50, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	logBefore := len(operator.Logs())

	// 1. A new leaf from the same CA, in place.
	crt, key := leaf(t, ca1, vc, harness.LeafOptions{})
	at := time.Now()
	setTLSData(t, vc, tlsSecretData(crt, key, ca1))
	t.Logf("leaf rotation: every node serves the new leaf %s after the Secret update", waitServing(t, vc, crt, both, at, rotationTimeout).Round(time.Millisecond))
	reloaded := map[string]bool{}
	for _, l := range parseLog(t, operator.Logs()[logBefore:]) {
		if l.message() == "TLS certificate reloaded" && strings.HasSuffix(l.ref(), "."+vc.Namespace) {
			reloaded[fmt.Sprint(l.Fields["pod"])] = true
		}
	}
	for _, p := range podNames(t, vc) {
		if !reloaded[p] {
			t.Errorf("no `TLS certificate reloaded` line for %s", p)
		}
	}

	// 2. The CA: a leaf from the new CA with both CAs in ca.crt, then the old CA removed.
	crt, key = leaf(t, ca2, vc, harness.LeafOptions{})
	at = time.Now()
	setTLSData(t, vc, tlsSecretData(crt, key, ca1, ca2))
	t.Logf("CA rotation, bundle: every node serves the new CA's leaf %s after the Secret update", waitServing(t, vc, crt, both, at, rotationTimeout).Round(time.Millisecond))
	setTLSData(t, vc, tlsSecretData(crt, key, ca2))
	// ca.crt alone changed: no handshake shows it, the tick re-points every node at its files.
	time.Sleep(controllersTick + 5*time.Second)
	verifyTLS(t, vc, ca2, 3, 1)

	if err := w.WaitAcked(20, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Report(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.String())
	refused := 0
	for _, s := range rep.Slots {
		refused += s.Failures
	}
	if refused > 0 || rep.LostReplicated > 0 || rep.LostUnreplicated > 0 || rep.ReadErrors > 0 {
		t.Fatalf("writes disturbed by the rotation: %d refused\n%s", refused, rep)
	}
	if after := strings.Join(podNames(t, vc), ","); after != before {
		t.Fatalf("pods replaced by a rotation: %s, then %s", before, after)
	}
}

// controllersTick is the operator's 30 s tick (controllers.TickInterval).
const controllersTick = 30 * time.Second

// TestTLSExpiryWarning: a leaf 10 days from expiry raises the WARN line and the
// CertificateExpiring condition, and the cluster stays Active (expiry is never Invalid); a
// renewed leaf clears the condition.
func TestTLSExpiryWarning(t *testing.T) {
	lane(t)
	ns := "tls-expiry"
	setupNamespace(t, ns)
	create(t, newImage(ns+"-image"), newConfig(ns+"-config", ns+"-image"))
	vc := newCluster(ns, "vc", ns+"-config", withShards(1), withReplicas(0))
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
	ca := newTestCA(t, ns+"-ca")
	notAfter := time.Now().Add(10 * 24 * time.Hour)
	crt, key := leaf(t, ca, vc, harness.LeafOptions{NotAfter: notAfter})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: ns}, Type: corev1.SecretTypeTLS, Data: tlsSecretData(crt, key, ca)})
	create(t, vc)
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	waitCondition(t, got, v1.ConditionCertificateExpiring, metav1.ConditionTrue, "tls.crt")
	found := false
	for _, l := range parseLog(t, operator.Logs()) {
		if l.message() == "TLS certificate expires soon" && strings.HasSuffix(l.ref(), "."+ns) && l.Level == "WARN" &&
			l.Fields["key"] == "tls.crt" && l.Fields["secret"] == "vc-tls" && l.Fields["not_after"] == notAfter.UTC().Format(time.RFC3339) {
			found = true
		}
		if strings.Contains(l.raw, "PRIVATE KEY") || strings.Contains(l.raw, "BEGIN CERTIFICATE") {
			t.Fatalf("key material in the log: %s", l.raw)
		}
	}
	if !found {
		t.Fatal("no `TLS certificate expires soon` WARN line for tls.crt")
	}
	crt, key = leaf(t, ca, vc, harness.LeafOptions{})
	setTLSData(t, got, tlsSecretData(crt, key, ca))
	waitCondition(t, got, v1.ConditionCertificateExpiring, metav1.ConditionFalse, "no certificate")
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.State != v1.StateActive {
		t.Fatalf("state %s", got.Status.State)
	}
}

// waitCondition waits for condition typ of vc to have status and a message containing says.
func waitCondition(t *testing.T, vc *v1.ValkeyCluster, typ string, status metav1.ConditionStatus, says string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var cur v1.ValkeyCluster
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, typ)
		if c != nil && c.Status == status && strings.Contains(c.Message, says) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition %s: %+v; want %s saying %q", typ, c, status, says)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTLSSecretRefChange: pointing tls.secretRef at another Secret replaces every node, one
// shard at a time, by nodes that mount it (a pod's volumes cannot change): afterwards every
// node serves the new Secret's leaf and the cluster is whole over TLS.
func TestTLSSecretRefChange(t *testing.T) {
	lane(t)
	vc, ca := tlsCluster(t, "tls-ref", 2, 1)
	before := podNames(t, vc)
	// The same CA: during the roll, old and new nodes verify each other on the bus.
	crt, key := leaf(t, ca, vc, harness.LeafOptions{})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls-2", Namespace: vc.Namespace}, Type: corev1.SecretTypeTLS, Data: tlsSecretData(crt, key, ca)})
	patchTLSRef(t, vc, "vc-tls-2")
	if _, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateUpgrading, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateActive, formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	waitReadyTLS(t, got, ca, 4)
	for _, p := range clusterPods(t, got) {
		if slices.Contains(before, p.Name) {
			t.Fatalf("pod %s mounting the old Secret was not replaced", p.Name)
		}
		var vn v1.ValkeyNode
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, &vn); err != nil || vn.Spec.TLSSecret != "vc-tls-2" {
			t.Fatalf("ValkeyNode %s: tlsSecret %q, %v", p.Name, vn.Spec.TLSSecret, err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	waitServing(t, got, crt, roots, time.Now(), rotationTimeout)
	verifyTLS(t, got, ca, 2, 1)
}

// TestTLSReshard: a TLS 3×1 on 8.0.1 holding 20 k keys is resharded 3 -> 4 under a writer over
// TLS; Valkey agrees over TLS afterwards, no write was refused for long, and every key reads
// back. It times the classic mover over TLS (each move's connections are TLS ones). Measured at
// load 37 with 50 k keys, the two movers side by side: pooled 3 -> 4 in 2 min 18 s and 4 -> 3 in
// 6 min 7 s; on the pass's one connection 3 min 32 s and 6 min 29 s (scale-in is left to the
// chaos suite, to keep `make test` short).
func TestTLSReshard(t *testing.T) {
	lane(t)
	const ns, keys = "tls-reshard", 20_000
	vc, ca := tlsCluster(t, ns, 3, 1, "8.0.1")
	verifyTLS(t, vc, ca, 3, 1)
	c := tlsClusterClient(t, vc, ca.Roots())
	defer c.Close()
	seedWith(t, c, keys)
	wopts := harness.WriterOptions{Addrs: []string{net.JoinHostPort(serviceHost(vc), "6379")}, Prefix: "tlsmove:",
		TLS: &tls.Config{RootCAs: ca.Roots(), MinVersion: tls.VersionTLS12}, Dialer: cluster.Dialer()}
	w, err := harness.StartWriter(wopts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	editCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.Shards = 4 })
	waitShardsTLS(t, vc, ca, 4, rollTimeout)
	t.Logf("4 shards in %s", time.Since(start).Round(100*time.Millisecond))
	verifyTLS(t, vc, ca, 4, 1)
	w.Close()
	r := readBackWriter(t, w, wopts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d acknowledged keys lost: slot moves lose none", r.LostUnreplicated)
	}
	reportMoveRefusals(t, r)
	checkSeededWith(t, c, keys)
}

// waitShardsTLS waits until the operator reports the new generation done (Active, Ready) and
// every one of the pods' nodes says cluster_state ok over TLS.
func waitShardsTLS(t *testing.T, vc *v1.ValkeyCluster, ca *testCA, shards int, timeout time.Duration) {
	t.Helper()
	time.Sleep(time.Second)
	deadline := time.Now().Add(timeout)
	for {
		cur := currentCluster(t, vc)
		if cur.Status.ObservedGeneration == cur.Generation && cur.Status.State == v1.StateActive &&
			meta.IsStatusConditionTrue(cur.Status.Conditions, v1.ConditionReady) && len(clusterPods(t, vc)) == shards*2 {
			waitReadyTLS(t, vc, ca, shards*2)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %d shards within %s: state %s, %q", shards, timeout, cur.Status.State, cur.Status.Message)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
