package harness

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// NewTestCA is NewCA that fails t on error.
func NewTestCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// ClusterLeaf issues a certificate for vc signed by ca, and returns tls.crt and tls.key as PEM.
func ClusterLeaf(t testing.TB, ca *CA, vc *v1.ValkeyCluster, o LeafOptions) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Leaf(ServiceHost(vc), o)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// TLSCluster creates, in a new namespace ns, an image, a config, a TLS Secret signed by a new CA
// and a TLS cluster of the given shape named vc, and waits until it is Active.
func TLSCluster(t testing.TB, ns string, shards, replicas int32, version ...string) (*v1.ValkeyCluster, *CA) {
	t.Helper()
	SetupNamespace(t, ns)
	img := NewImage(ns + "-image")
	if len(version) > 0 {
		img.Spec.Tag, img.Spec.Version = version[0], version[0]
	}
	Create(t, img, NewConfig(ns+"-config", ns+"-image"))
	vc := NewCluster(ns, "vc", ns+"-config", WithShards(shards), WithReplicas(replicas))
	vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
	ca := NewTestCA(t, ns+"-ca")
	crt, key := ClusterLeaf(t, ca, vc, LeafOptions{})
	Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: ns}, Type: corev1.SecretTypeTLS, Data: TLSSecretData(crt, key, ca)})
	Create(t, vc)
	got, err := WaitState(context.Background(), K8s, client.ObjectKeyFromObject(vc), v1.StateActive, FormTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return got, ca
}

// ClusterTLSCreds are the operator's credentials for vc over TLS, trusting only ca and verifying each
// node under its pod's DNS name.
func ClusterTLSCreds(t testing.TB, vc *v1.ValkeyCluster, ca *CA) valkey.Credentials {
	t.Helper()
	creds, err := OperatorCreds(context.Background(), K8s, vc)
	if err != nil {
		t.Fatal(err)
	}
	return TLSCreds(creds, vc, Pods(t, vc), ca.Roots())
}

// TLSClusterClient is a valkey-go cluster client seeded with the Service's name alone, resolving
// through the cluster DNS, trusting only roots and verifying every name it reaches (the Service,
// then the per-pod names nodes announce in CLUSTER SHARDS and redirects).
//
// The Service publishes every node's address, ready or not, so right after a roll its name may
// still resolve to a node being retired, which resets the connection (make test, 2026-12-07,
// load 50-70): the client is made again for up to 30 s, as an application's would be.
func TLSClusterClient(t testing.TB, vc *v1.ValkeyCluster, roots *x509.CertPool) valkeygo.Client {
	t.Helper()
	var c valkeygo.Client
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		c, err = valkeygo.NewClient(valkeygo.ClientOption{
			InitAddress:  []string{net.JoinHostPort(ServiceHost(vc), "6379")},
			TLSConfig:    &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			DisableCache: true, Dialer: *Cluster.Dialer(),
		})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
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
				if !strings.HasSuffix(e.Hostname, "."+ServiceHost(vc)) {
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

// VerifyTLS checks vc over TLS: shards*(replicas+1) pods refusing plaintext, the cluster whole
// by every node's view over TLS with announced hostnames, valkey-cli through the Service's name
// verifying ca (and failing without it), and keys written and read back over TLS.
func VerifyTLS(t testing.TB, vc *v1.ValkeyCluster, ca *CA, shards, replicas int) {
	t.Helper()
	ctx := context.Background()
	pods := Pods(t, vc)
	if want := shards * (replicas + 1); len(pods) != want {
		t.Fatalf("%d running pods, want %d", len(pods), want)
	}
	for _, p := range pods {
		if reply, err := plaintextPing(PodAddr(p)); err == nil && strings.HasPrefix(reply, "+PONG") {
			t.Fatalf("node %s answered PING in plaintext: %q", p.Name, reply)
		}
	}
	creds := ClusterTLSCreds(t, vc, ca)
	var addrs []string
	for _, p := range pods {
		addrs = append(addrs, PodAddr(p))
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
			WaitLinkUp(t, v.Addr, creds)
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
	// Retried for 30 s, as TLSClusterClient is: right after a roll the Service's name may still
	// resolve to a retired node's address (make test, 2026-12-07: "Connection refused" once, at
	// load 33, in TestTLSSecretRefChange).
	var out []byte
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, err = Cluster.CommandWithDNS("valkey-cli", "-h", ServiceHost(vc), "-p", "6379", "--tls", "--cacert", caFile, "PING").CombinedOutput()
		if (err == nil && strings.TrimSpace(string(out)) == "PONG") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Fatalf("valkey-cli --tls --cacert through the Service's name: %v\n%s", err, out)
	}
	out, _ = Cluster.CommandWithDNS("valkey-cli", "-h", ServiceHost(vc), "-p", "6379", "--tls", "PING").CombinedOutput()
	if strings.TrimSpace(string(out)) == "PONG" {
		t.Fatalf("valkey-cli --tls without the cluster's CA got PONG: verification is off")
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	w := TLSClusterClient(t, vc, roots)
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
	r := TLSClusterClient(t, vc, roots)
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
