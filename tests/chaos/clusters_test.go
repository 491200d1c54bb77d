package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// The suite's clusters: every feature a day-2 change touches, on both Valkey versions, at a
// size the 2-core machine runs beside tests/e2e (18 valkey-server processes at the start, up to
// 36 at the bounds of the schedule).
var startClusters = []schedule.Cluster{
	{Name: "acl", Shards: 3, Replicas: 1, Version: schedule.Valkey8, ACL: true},
	{Name: "nine", Shards: 2, Replicas: 2, Version: schedule.Valkey9},
	{Name: "tls", Shards: 3, Replicas: 1, Version: schedule.Valkey8, TLS: true},
}

// aclUser is the user the ACL cluster's writer writes as; aclRole its role.
const (
	aclUser = "app"
	aclRole = "chaos-rw"
)

// target is one cluster under test: its objects, its writer, and what its spec says now.
type target struct {
	name   string // the schedule's name
	ns     string
	vc     *v1.ValkeyCluster
	config string // its own ValkeyConfig, so a config change rolls this cluster alone
	image8 string
	image9 string

	mu   sync.Mutex
	spec schedule.Cluster // as the events so far left it
	// password is the ACL user's current password, retired its earlier ones (refused at the end).
	password string
	retired  []string
	rotation int
	// ca signs the TLS leaves; cert is the tls.crt the Secret holds now.
	ca   *harness.CA
	cert []byte

	writer *harness.Writer
	wopts  harness.WriterOptions
}

func (c *target) key() client.ObjectKey { return client.ObjectKeyFromObject(c.vc) }

func (c *target) current() schedule.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spec
}

// create applies the cluster's images, config, role, Secret and ValkeyCluster.
func (c *target) create(ctx context.Context, seed uint64) error {
	if err := harness.EnsureNamespace(ctx, k8s, c.ns); err != nil {
		return err
	}
	img := func(name, version string) *v1.ValkeyImage {
		return &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ValkeyImageSpec{Repository: "valkey/valkey", Tag: version, Version: version}}
	}
	image := c.image8
	if c.spec.Version == schedule.Valkey9 {
		image = c.image9
	}
	cfg := &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: c.config}, Spec: v1.ValkeyConfigSpec{
		ImageRef:  image,
		Resources: &v1.ValkeyResources{CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("256Mi"))},
		// No diskless sync delay: a replacement's first sync starts at once, as in tests/e2e.
		// maxmemory well above what the writer stores in a long run (about 60 MB a cluster).
		Valkey: map[string]string{"maxmemory": "200mb", "repl-diskless-sync-delay": "0"},
	}}
	objs := []client.Object{img(c.image8, schedule.Valkey8), img(c.image9, schedule.Valkey9), cfg}
	c.vc = &v1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vc", Namespace: c.ns}, Spec: v1.ValkeyClusterSpec{
		ConfigRef: c.config, Shards: int32(c.spec.Shards), ReplicasPerShard: int32(c.spec.Replicas)}}
	if c.spec.ACL {
		c.password = fmt.Sprintf("seed-%d-pw-0", seed)
		c.vc.Spec.ACL = []v1.ACLBinding{c.binding(c.password)}
	}
	if c.spec.TLS {
		ca, err := harness.NewCA(c.ns + "-ca")
		if err != nil {
			return err
		}
		crt, k, err := ca.Leaf(harness.ServiceHost(c.vc), harness.LeafOptions{})
		if err != nil {
			return err
		}
		c.ca, c.cert = ca, crt
		c.vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-tls", Namespace: c.ns}, Type: corev1.SecretTypeTLS, Data: harness.TLSSecretData(crt, k, ca)})
	}
	for _, o := range append(objs, c.vc) {
		if err := k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// binding binds aclUser to aclRole on every key with the given passwords.
func (c *target) binding(passwords ...string) v1.ACLBinding {
	b := v1.ACLBinding{Username: aclUser, Permissions: []v1.ACLPermission{{RoleRef: aclRole,
		Keys: []v1.KeyPattern{{Pattern: "*", Access: v1.KeyAccessReadWrite}}}}}
	for _, pw := range passwords {
		b.PasswordHashes = append(b.PasswordHashes, harness.PasswordHash(pw))
	}
	return b
}

// ensureRole creates the ACL role: read and write, and WAIT, which the writer sends on its
// sample (it is in neither category).
func ensureRole(ctx context.Context) error {
	r := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: aclRole}, Spec: v1.ValkeyRoleSpec{
		Categories: []v1.CategoryRule{{Name: "read", Access: v1.RuleAllow}, {Name: "write", Access: v1.RuleAllow}},
		Commands:   []v1.CommandRule{{Name: "wait", Access: v1.RuleAllow}},
	}}
	if err := k8s.Create(ctx, r); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create role: %w", err)
	}
	return nil
}

// pods are the cluster's running pods.
func (c *target) pods(ctx context.Context) ([]corev1.Pod, error) {
	return harness.ClusterPods(ctx, k8s, c.vc)
}

// creds are the operator's credentials for the cluster's pods, over TLS in a TLS cluster.
func (c *target) creds(ctx context.Context, pods []corev1.Pod) (valkey.Credentials, error) {
	creds, err := harness.OperatorCreds(ctx, k8s, c.vc)
	if err != nil || c.ca == nil {
		return creds, err
	}
	return harness.TLSCreds(creds, c.vc, pods, c.ca.Roots()), nil
}

// writerOptions seed a cluster client with the Service's name through the cluster DNS, as an
// application does (in a TLS cluster nodes are redirected to by hostname), and in a plaintext
// cluster the pods' addresses too; the ACL user with its current password in an ACL cluster.
// The name matters: valkey-go refreshes its topology only through nodes it knows and its seeds,
// and with pod addresses alone a writer whose every node was replaced (seed 8675309: two
// Kubernetes nodes stopped 23 s apart held all six pods of the ACL cluster) dialled dead
// addresses for the rest of the run while the cluster served again.
func (c *target) writerOptions(ctx context.Context) (harness.WriterOptions, error) {
	o := harness.WriterOptions{
		Prefix: "chaos:",
		// 50 ms between writes of a slot: about 300 writes a second a cluster, enough to see
		// every refusal. At 25 ms (600 a second) a run beside two other local clusters reached
		// load 57 and liveness probes killed whole shards (seed 881596220, see the README).
		Interval: 50 * time.Millisecond,
		// WAIT 1 on one write in four: a sample of replicated writes on every slot all along,
		// and unreplicated ones beside them to count what a crash may take.
		WaitEvery: 4,
	}
	o.Addrs = []string{net.JoinHostPort(harness.ServiceHost(c.vc), "6379")}
	o.Dialer = cluster.Dialer()
	if c.ca != nil {
		o.TLS = &tls.Config{RootCAs: c.ca.Roots(), MinVersion: tls.VersionTLS12}
	} else {
		pods, err := c.pods(ctx)
		if err != nil {
			return o, err
		}
		for _, p := range pods {
			o.Addrs = append(o.Addrs, harness.PodAddr(p))
		}
	}
	if c.spec.ACL {
		c.mu.Lock()
		o.Username, o.Password = aclUser, c.password
		c.mu.Unlock()
	}
	return o, nil
}

// update reads the cluster, applies edit and writes it, again on a conflict.
func (c *target) update(ctx context.Context, edit func(*v1.ValkeyCluster)) error {
	for {
		var cur v1.ValkeyCluster
		if err := k8s.Get(ctx, c.key(), &cur); err != nil {
			return err
		}
		edit(&cur)
		err := k8s.Update(ctx, &cur)
		if err == nil || !strings.Contains(err.Error(), "modified") {
			return err
		}
	}
}

// updateConfig is update for the cluster's ValkeyConfig.
func (c *target) updateConfig(ctx context.Context, edit func(*v1.ValkeyConfig)) error {
	for {
		var cur v1.ValkeyConfig
		if err := k8s.Get(ctx, client.ObjectKey{Name: c.config}, &cur); err != nil {
			return err
		}
		edit(&cur)
		err := k8s.Update(ctx, &cur)
		if err == nil || !strings.Contains(err.Error(), "modified") {
			return err
		}
	}
}

// updateSecret is update for the TLS Secret.
func (c *target) updateSecret(ctx context.Context, data map[string][]byte) error {
	for {
		var s corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: "vc-tls"}, &s); err != nil {
			return err
		}
		s.Data = data
		err := k8s.Update(ctx, &s)
		if err == nil || !strings.Contains(err.Error(), "modified") {
			return err
		}
	}
}

// delete removes the cluster's namespace and cluster-scoped objects, so the next run of the
// same test binary starts on an idle machine.
func (c *target) delete(ctx context.Context) {
	_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}})
	_ = k8s.Delete(ctx, &v1.ValkeyConfig{ObjectMeta: metav1.ObjectMeta{Name: c.config}})
	_ = k8s.Delete(ctx, &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: c.image8}})
	_ = k8s.Delete(ctx, &v1.ValkeyImage{ObjectMeta: metav1.ObjectMeta{Name: c.image9}})
}

// shardOf is a pod's shard index label (-1 if missing).
func shardOf(p corev1.Pod) int {
	n, err := strconv.Atoi(p.Labels[v1.LabelShard])
	if err != nil {
		return -1
	}
	return n
}
