package v1alpha1_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// These tests send manifests, written as a user writes them, to a real kube-apiserver with the
// generated CRDs installed, and check that the schema (OpenAPI and CEL) accepts the good ones
// and refuses each bad one with the readable message chosen for its rule. Creates are
// server-side dry runs: the whole admission chain runs, nothing is stored.

const testNamespace = "my-app"

// sha256Hex is what a user puts in passwordHashes: `echo -n password | sha256sum`.
func sha256Hex(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// manifest expands the placeholders of a test manifest: <hash> and <hash2> become SHA-256
// hashes of two passwords.
func manifest(text string) string {
	return strings.NewReplacer(
		"<hash>", sha256Hex("app-password"),
		"<hash2>", sha256Hex("new-app-password"),
	).Replace(text)
}

// decode parses a (possibly multi-document) YAML manifest into objects.
func decode(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for doc := range strings.SplitSeq(manifest(text), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("test manifest is not YAML: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatal("test manifest holds no object")
	}
	return objs
}

func ensureNamespace(t *testing.T, c client.Client) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}
	if err := c.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", testNamespace, err)
	}
}

// admissionCase is one manifest and what the API server must answer: accepted when wantErr is
// empty, otherwise refused as Invalid with wantErr in the message.
type admissionCase struct {
	name     string
	manifest string
	wantErr  string
}

func runAdmissionCases(t *testing.T, cases []admissionCase) {
	t.Helper()
	c := apiServer(t)
	ensureNamespace(t, c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, obj := range decode(t, tc.manifest) {
				err := c.Create(t.Context(), obj, client.DryRunAll)
				checkAdmission(t, obj, err, tc.wantErr)
			}
		})
	}
}

func checkAdmission(t *testing.T, obj *unstructured.Unstructured, err error, wantErr string) {
	t.Helper()
	what := obj.GetKind() + " " + obj.GetName()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("%s refused, want accepted: %v", what, err)
	case wantErr == "":
		return
	case err == nil:
		t.Fatalf("%s accepted, want refused with %q", what, wantErr)
	case !apierrors.IsInvalid(err):
		t.Fatalf("%s refused with a non-validation error, want Invalid with %q: %v", what, wantErr, err)
	case !strings.Contains(err.Error(), wantErr):
		t.Fatalf("%s refused with\n  %v\nwant the message to contain\n  %q", what, err, wantErr)
	default:
		t.Logf("refused as expected: %v", err)
	}
}

// cluster is a minimal valid ValkeyCluster manifest followed by extra spec lines.
func cluster(extraSpec string) string {
	return `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyCluster
metadata:
  name: my-cluster
  namespace: my-app
spec:
  configRef: standard
  shards: 3
  replicasPerShard: 1
` + extraSpec
}

// config is a ValkeyConfig named standard with the given spec lines.
func config(spec string) string {
	return `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: standard
spec:
` + spec
}

// clusterWithUser is a cluster with one ACL binding built from the given lines.
func clusterWithUser(username, hash, permissions string) string {
	return cluster(fmt.Sprintf(`  acl:
    - username: %q
      passwordHashes: [%q]
      permissions:
%s`, username, hash, permissions))
}

const readWritePermission = `        - roleRef: read-write
          keys:
            - pattern: "myapp:*"
              access: readwrite
`

// The examples of the original operator's documentation, which users already hold: all must
// be accepted unchanged.
func TestAdmissionAcceptsDocumentedManifests(t *testing.T) {
	runAdmissionCases(t, []admissionCase{
		{name: "image", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyImage
metadata:
  name: valkey-9-0
spec:
  repository: valkey/valkey
  tag: "9.0.0"
  version: "9.0.0"
`},
		{name: "image from a private registry with a port", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyImage
metadata:
  name: valkey-8-0-1
spec:
  repository: registry.example.com:5000/mirror/valkey/valkey
  tag: 8.0.1-bookworm
  version: 8.0.1
`},
		{name: "standard config", manifest: config(`  imageRef: valkey-9-0
  resources:
    cpu: "1"
    memory: "2Gi"
  valkey:
    maxmemory: "1500mb"
    maxmemory-policy: "allkeys-lru"
`)},
		{name: "a module's category, as the original admits (^[a-zA-Z][a-zA-Z0-9_-]*$)", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyRole
metadata:
  name: json-reader
spec:
  categories:
    - name: json
      access: allow
    - name: Bloom_filters-2
      access: deny
`},
		{name: "config inheritance", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: base
spec:
  imageRef: valkey-9-0
  valkey:
    maxmemory-policy: "allkeys-lru"
---
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: small
spec:
  baseRef: base
  resources:
    cpu: "0.5"
    memory: "512Mi"
  valkey:
    maxmemory: "400mb"
---
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: large
spec:
  baseRef: base
  resources:
    cpu: "4"
    memory: "16Gi"
  valkey:
    maxmemory: "14000mb"
`},
		{name: "config with platform acl", manifest: config(`  imageRef: valkey-9-0
  acl:
    - username: app-user
      passwordHashes:
        - <hash>
      permissions:
        - roleRef: app-readwrite
          keys:
            - pattern: "myapp:*"
              access: readwrite
`)},
		{name: "config with an empty spec", manifest: config(`  {}
`)},
		{name: "config with loglevel, save and an unquoted integer cpu", manifest: config(`  resources:
    cpu: 2
  valkey:
    loglevel: notice
    save: ""
    appendonly: "no"
    io-threads: "4"
`)},
		{name: "role read-write", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyRole
metadata:
  name: read-write
spec:
  categories:
    - name: read
      access: allow
    - name: write
      access: allow
`},
		{name: "role with commands and a subcommand", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyRole
metadata:
  name: app-readwrite
spec:
  categories:
    - name: read
      access: allow
    - name: write
      access: allow
  commands:
    - name: cluster
      subcommand: info
      access: allow
    - name: flushall
      access: deny
`},
		{name: "minimal cluster", manifest: cluster("")},
		{name: "cluster without replicas", manifest: `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyCluster
metadata:
  name: single
  namespace: my-app
spec:
  configRef: standard
  shards: 1
  replicasPerShard: 0
`},
		{name: "cluster with tls", manifest: cluster(`  tls:
    secretRef: my-cluster-tls
`)},
		{name: "cluster with zone-aware placement", manifest: cluster(`  placement:
    zones:
      - us-east-1a
      - us-east-1b
      - us-east-1c
    zoneSpread: required
    nodeSelector:
      node-pool: cache
`)},
		{name: "cluster with bestEffort spread and a prefixed node label", manifest: cluster(`  placement:
    zoneSpread: bestEffort
    nodeSelector:
      cloud.example.com/pool: valkey
`)},
		{name: "cluster with a node label of the longest prefix", manifest: cluster("  placement:\n    nodeSelector:\n      " + strings.Repeat("a", 253) + "/pool: valkey\n")},
		{name: "cluster with an acl user", manifest: cluster(`  acl:
    - username: app-user
      passwordHashes:
        - <hash>
      permissions:
        - roleRef: read-write
          keys:
            - pattern: "myapp:*"
              access: readwrite
`)},
		{name: "cluster during password rotation", manifest: cluster(`  acl:
    - username: app-user
      passwordHashes: ["<hash>", "<hash2>"]
      permissions:
        - roleRef: read-write
          keys: [{pattern: "myapp:*", access: readwrite}]
          channels: ["orders:*"]
    - username: default
      passwordHashes: ["<hash2>"]
      permissions:
        - roleRef: read-only
          keys: []
`)},
		{name: "cluster with network clients", manifest: cluster(`  network:
    policy: Enabled
    clients:
      - podSelector: {matchLabels: {valkey-client: "true"}}
      - namespaceSelector: {matchLabels: {team: payments}}
        podSelector: {matchLabels: {app: checkout}}
      - ipBlock: {cidr: 10.20.0.0/16, except: [10.20.1.0/24]}
`)},
		{name: "cluster with its policy off", manifest: cluster("  network:\n    policy: Disabled\n")},
		{name: "cluster with pod annotations", manifest: cluster(`  podAnnotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: "6379"
`)},
		{name: "reference example: tls, acl selectors, placement, annotations", manifest: cluster(`  acl:
    - username: team-batch
      passwordHashes:
        - <hash>
      permissions:
        - roleRef: app-readwrite
          keys:
            - pattern: "batch:*"
              access: readwrite
        - roleRef: app-readwrite
          keys:
            - pattern: "metrics:*"
              access: read
  placement:
    zones:
      - us-east-1a
      - us-east-1b
    zoneSpread: required
  tls:
    secretRef: my-cluster-tls
  podAnnotations:
    example.com/inject-sidecar: "false"
`)},
		{name: "longest cluster name", manifest: strings.Replace(cluster(""), "name: my-cluster", "name: c"+strings.Repeat("x", 56), 1)},
		// The docs bound shards and replicasPerShard from below only; ours bound the nodes,
		// shards × (replicasPerShard + 1), by the 1000 Valkey's cluster bus is designed for.
		{name: "most shards", manifest: strings.NewReplacer("shards: 3", "shards: 1000", "replicasPerShard: 1", "replicasPerShard: 0").Replace(cluster(""))},
		{name: "many replicas", manifest: strings.Replace(cluster(""), "replicasPerShard: 1", "replicasPerShard: 10", 1)},
		{name: "most replicas", manifest: strings.NewReplacer("shards: 3", "shards: 1", "replicasPerShard: 1", "replicasPerShard: 999").Replace(cluster(""))},
		{name: "most nodes", manifest: strings.NewReplacer("shards: 3", "shards: 200", "replicasPerShard: 1", "replicasPerShard: 4").Replace(cluster(""))},
		{name: "no replicas", manifest: strings.Replace(cluster(""), "replicasPerShard: 1", "replicasPerShard: 0", 1)},

		// ValkeyImage: the docs bound none of its fields; version is informational, and a
		// digest may pin the tag.
		{name: "version without patch", manifest: image("valkey/valkey", "9.0", "9.0")},
		{name: "version with a v", manifest: image("valkey/valkey", "9.0.0", "v9.0.0")},
		{name: "version as a word", manifest: image("valkey/valkey", "unstable", "unstable")},
		{name: "tag pinned by a digest", manifest: image("valkey/valkey", "9.0.0@sha256:"+strings.Repeat("ab", 32), "9.0.0")},
		{name: "digest alone", manifest: image("valkey/valkey", "sha256:"+strings.Repeat("0f", 32), "9.0.0")},
		{name: "digest alone with its @", manifest: image("valkey/valkey", "@sha256:"+strings.Repeat("0f", 32), "9.0.0")},
		{name: "longest tag", manifest: image("valkey/valkey", "t"+strings.Repeat("x", 127), "9.0.0")},
	})
}

// Every directive the docs do not force passes through, as in the original: the rest of the
// cluster-* and tls-* families, the persistence and memory knobs, socket and pid files.
func TestAdmissionPassesOtherDirectivesThrough(t *testing.T) {
	var cases []admissionCase
	for _, d := range []struct{ name, value string }{
		{"cluster-allow-reads-when-down", "yes"},
		{"cluster-require-full-coverage", "no"},
		{"cluster-allow-replica-migration", "no"},
		{"cluster-migration-barrier", "2"},
		{"cluster-replica-validity-factor", "0"},
		{"cluster-replica-no-failover", "no"},
		{"cluster-allow-pubsubshard-when-down", "yes"},
		{"cluster-link-sendbuf-limit", "67108864"},
		{"cluster-slot-stats-enabled", "yes"},
		{"tls-protocols", `"TLSv1.2 TLSv1.3"`}, // quoted, as valkey.conf needs a one-argument value with a space
		{"tls-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"},
		{"tls-ciphers", "DEFAULT:!MEDIUM"},
		{"tls-prefer-server-ciphers", "yes"},
		{"tls-session-caching", "no"},
		{"maxmemory", "1500mb"},
		{"maxmemory-policy", "allkeys-lru"},
		{"loglevel", "warning"},
		{"save", "3600 1"},
		{"appendonly", "yes"},
		{"appendfilename", "appendonly.aof"},
		{"dbfilename", "dump.rdb"},
		{"pidfile", "/tmp/valkey.pid"},
		{"unixsocket", "/tmp/valkey.sock"},
		{"unixsocketperm", "700"},
		{"io-threads", "4"},
		{"client-output-buffer-limit", "pubsub 32mb 8mb 60"},
		{"notify-keyspace-events", "Ex"},
		{"lazyfree-lazy-eviction", "yes"},
		{"shutdown-on-sigterm", "default"},
	} {
		cases = append(cases, admissionCase{
			name:     d.name,
			manifest: config(fmt.Sprintf("  valkey:\n    %s: %q\n", d.name, d.value)),
		})
	}
	runAdmissionCases(t, cases)
}

// One bad manifest per single-object rule, each refused with the message that says what to
// fix.
func TestAdmissionRefusesBadManifests(t *testing.T) {
	runAdmissionCases(t, []admissionCase{
		// ValkeyCluster topology.
		{name: "zero shards", manifest: strings.Replace(cluster(""), "shards: 3", "shards: 0", 1),
			wantErr: "shards must be between 1 and 1000: a shard is at least one node, and a cluster at most 1000 nodes (Valkey's cluster bus is designed for about 1000)"},
		{name: "more shards than a cluster has nodes", manifest: strings.NewReplacer("shards: 3", "shards: 1001", "replicasPerShard: 1", "replicasPerShard: 0").Replace(cluster("")),
			wantErr: "shards must be between 1 and 1000"},
		{name: "as many shards as slots", manifest: strings.Replace(cluster(""), "shards: 3", "shards: 16384", 1),
			wantErr: "spec.shards in body should be less than or equal to 1000"},
		{name: "shards past int32", manifest: strings.Replace(cluster(""), "shards: 3", "shards: 2147483648", 1),
			wantErr: "spec.shards in body should be less than or equal to 1000"},
		{name: "negative replicas", manifest: strings.Replace(cluster(""), "replicasPerShard: 1", "replicasPerShard: -1", 1),
			wantErr: "replicasPerShard must be between 0 and 999: it counts the replicas of each primary, and a cluster is at most 1000 nodes"},
		{name: "a shard of more than 1000 nodes", manifest: strings.NewReplacer("shards: 3", "shards: 1", "replicasPerShard: 1", "replicasPerShard: 1000").Replace(cluster("")),
			wantErr: "spec.replicasPerShard in body should be less than or equal to 999"},
		{name: "replicas past int32", manifest: strings.Replace(cluster(""), "replicasPerShard: 1", "replicasPerShard: 2147483648", 1),
			wantErr: "spec.replicasPerShard in body should be less than or equal to 999"},
		{name: "more than 1000 nodes", manifest: strings.NewReplacer("shards: 3", "shards: 3", "replicasPerShard: 1", "replicasPerShard: 333").Replace(cluster("")),
			wantErr: "shards × (replicasPerShard + 1) must be at most 1000 nodes: Valkey's cluster bus is designed for at most about 1000 nodes; use fewer shards or replicas, or split the data over several ValkeyClusters"},
		{name: "the most shards with a replica each", manifest: strings.Replace(cluster(""), "shards: 3", "shards: 1000", 1),
			wantErr: "shards × (replicasPerShard + 1) must be at most 1000 nodes"},
		{name: "missing shards", manifest: strings.Replace(cluster(""), "  shards: 3\n", "", 1),
			wantErr: `spec.shards: Required value`},

		// Names.
		{name: "cluster name starting with a digit", manifest: strings.Replace(cluster(""), "name: my-cluster", "name: 1cache", 1),
			wantErr: "ValkeyCluster names must start with a lowercase letter, hold only lowercase letters, digits and '-', and be at most 57 characters"},
		{name: "cluster name too long for pod hostnames", manifest: strings.Replace(cluster(""), "name: my-cluster", "name: c"+strings.Repeat("x", 57), 1),
			wantErr: "ValkeyCluster names must start with a lowercase letter"},

		// References.
		{name: "empty configRef", manifest: strings.Replace(cluster(""), "configRef: standard", `configRef: ""`, 1),
			wantErr: "configRef must name a ValkeyConfig: a lowercase DNS name such as standard"},
		{name: "configRef not a name", manifest: strings.Replace(cluster(""), "configRef: standard", "configRef: Standard_Config", 1),
			wantErr: "configRef must name a ValkeyConfig"},
		{name: "empty tls secretRef", manifest: cluster("  tls:\n    secretRef: \"\"\n"),
			wantErr: "tls.secretRef must name a Secret in the cluster's namespace"},
		{name: "tls without secretRef", manifest: cluster("  tls: {}\n"),
			wantErr: "spec.tls.secretRef: Required value"},
		{name: "empty roleRef", manifest: clusterWithUser("app-user", "<hash>", "        - roleRef: \"\"\n          keys: []\n"),
			wantErr: "roleRef must name a ValkeyRole"},
		{name: "empty imageRef", manifest: config("  imageRef: \"\"\n"),
			wantErr: "imageRef must name a ValkeyImage"},
		{name: "baseRef not a name", manifest: config("  baseRef: Base Config\n"),
			wantErr: "baseRef must name a ValkeyConfig"},
		{name: "baseRef names the config itself", manifest: config("  baseRef: standard\n"),
			wantErr: "spec.baseRef cannot name the ValkeyConfig itself"},

		// ACL bindings.
		{name: "password hash in uppercase", manifest: clusterWithUser("app-user", strings.ToUpper(sha256Hex("x")), readWritePermission),
			wantErr: "passwordHashes entries must be SHA-256 hex digests: exactly 64 lowercase hex characters"},
		{name: "plaintext password", manifest: clusterWithUser("app-user", "hunter2", readWritePermission),
			wantErr: "passwordHashes entries must be SHA-256 hex digests"},
		{name: "hash with Valkey's # prefix", manifest: clusterWithUser("app-user", "#"+sha256Hex("x"), readWritePermission),
			wantErr: "passwordHashes entries must be SHA-256 hex digests"},
		{name: "no password hash", manifest: cluster(`  acl:
    - username: app-user
      passwordHashes: []
      permissions:
` + readWritePermission),
			wantErr: "spec.acl[0].passwordHashes in body should have at least 1 items"},
		{name: "empty username", manifest: clusterWithUser("", "<hash>", readWritePermission),
			wantErr: "username must be non-empty and contain only letters, digits, '-' and '_'"},
		{name: "username with a space", manifest: clusterWithUser("app user", "<hash>", readWritePermission),
			wantErr: "username must be non-empty and contain only letters, digits, '-' and '_'"},
		{name: "reserved username", manifest: clusterWithUser("_momento_operator", "<hash>", readWritePermission),
			wantErr: "usernames starting with _momento_ are reserved for the operator's own users"},
		{name: "duplicate username", manifest: cluster(`  acl:
    - username: app-user
      passwordHashes: ["<hash>"]
      permissions:
` + readWritePermission + `    - username: other
      passwordHashes: ["<hash>"]
      permissions:
` + readWritePermission + `    - username: app-user
      passwordHashes: ["<hash2>"]
      permissions:
` + readWritePermission),
			wantErr: "duplicate username in ACL bindings: each username may be bound only once"},
		{name: "duplicate username on a config", manifest: config(`  acl:
    - username: app-user
      passwordHashes: ["<hash>"]
      permissions:
` + readWritePermission + `    - username: app-user
      passwordHashes: ["<hash2>"]
      permissions:
` + readWritePermission),
			wantErr: "duplicate username in ACL bindings: each username may be bound only once"},
		{name: "no permission", manifest: cluster(`  acl:
    - username: app-user
      passwordHashes: ["<hash>"]
      permissions: []
`),
			wantErr: "spec.acl[0].permissions in body should have at least 1 items"},
		{name: "permission without keys", manifest: clusterWithUser("app-user", "<hash>", "        - roleRef: read-write\n"),
			wantErr: "spec.acl[0].permissions[0].keys: Required value"},
		{name: "unknown key access", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: [{pattern: "myapp:*", access: rw}]
`),
			wantErr: `Unsupported value: "rw": supported values: "read", "write", "readwrite"`},
		{name: "key pattern with a space", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: [{pattern: "my app:*"}]
`),
			wantErr: "key patterns must be non-empty and contain no spaces, quotes or control characters"},
		{name: "channel pattern with a quote", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: []
          channels: ["orders\"*"]
`),
			wantErr: "channel patterns must be non-empty and contain no spaces, quotes or control characters"},

		{name: "key pattern closing a selector", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: [{pattern: "cache(*)"}]
`),
			wantErr: "key patterns must not start with ~ or % (the operator writes the prefix that matches access) nor contain ( or )"},
		{name: "key pattern with its ~", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: [{pattern: "~*"}]
`),
			wantErr: "key patterns must not start with ~ or %"},
		{name: "channel pattern closing a selector", manifest: clusterWithUser("app-user", "<hash>", `        - roleRef: read-write
          keys: []
          channels: ["news)"]
`),
			wantErr: "channel patterns must not start with & (the operator writes it) nor contain ( or )"},

		// Placement.
		{name: "unknown zoneSpread", manifest: cluster("  placement:\n    zoneSpread: strict\n"),
			wantErr: `Unsupported value: "strict": supported values: "bestEffort", "required"`},
		{name: "zone with a space", manifest: cluster("  placement:\n    zones: [\"us east 1a\"]\n"),
			wantErr: "zones must be zone names as in the node label topology.kubernetes.io/zone"},
		{name: "duplicate zone", manifest: cluster("  placement:\n    zones: [us-east-1a, us-east-1a]\n"),
			wantErr: `Duplicate value: "us-east-1a"`},
		{name: "nodeSelector key that is no label key", manifest: cluster("  placement:\n    nodeSelector:\n      \"node pool\": cache\n"),
			wantErr: "placement.nodeSelector keys must be node label keys: an optional DNS prefix and '/', then a name of at most 63 letters, digits, '-', '.' and '_', like node-pool; not node pool"},
		{name: "nodeSelector value that is no label value", manifest: cluster("  placement:\n    nodeSelector:\n      node-pool: \"cache pool\"\n"),
			wantErr: "placement.nodeSelector values must be node label values: at most 63 letters, digits, '-', '_' and '.'"},
		{name: "nodeSelector key with a prefix too long for a label", manifest: cluster("  placement:\n    nodeSelector:\n      " + strings.Repeat("a", 254) + "/pool: cache\n"),
			wantErr: "placement.nodeSelector key prefixes (before the '/') must be at most 253 characters, as Kubernetes requires of label keys: no pod could carry the key; not " + strings.Repeat("a", 254) + "/pool"},
		{name: "nodeSelector value too long for a label", manifest: cluster("  placement:\n    nodeSelector:\n      node-pool: " + strings.Repeat("a", 64) + "\n"),
			wantErr: "Too long: may not be more than 63 bytes"},

		// spec.network.
		{name: "network policy mode", manifest: cluster("  network:\n    policy: \"off\"\n"),
			wantErr: `Unsupported value: "off"`},
		{name: "empty client entry", manifest: cluster("  network:\n    clients:\n      - {}\n"),
			wantErr: "network.clients entries must set podSelector, namespaceSelector or ipBlock"},
		{name: "ipBlock with a selector", manifest: cluster("  network:\n    clients:\n      - ipBlock: {cidr: 10.0.0.0/8}\n        podSelector: {}\n"),
			wantErr: "network.clients entries set ipBlock alone, as a NetworkPolicy requires"},

		// Pod annotations.
		{name: "reserved annotation", manifest: cluster("  podAnnotations:\n    valkey.gomomento.com/spec-hash: forged\n    prometheus.io/scrape: \"true\"\n"),
			wantErr: "podAnnotations key valkey.gomomento.com/spec-hash uses the prefix valkey.gomomento.com/, which is reserved for the operator; choose another prefix"},
		{name: "invalid annotation key", manifest: cluster("  podAnnotations:\n    \"scrape me\": \"true\"\n"),
			wantErr: "podAnnotations keys must be annotation keys: an optional DNS prefix and '/', then a name of at most 63 letters, digits, '-', '.' and '_', like example.com/scrape; not scrape me"},

		// ValkeyConfig directives and resources.
		{name: "logfile", manifest: config("  valkey:\n    logfile: /var/log/valkey.log\n"),
			wantErr: v1alpha1.LogfileMessage},
		{name: "uppercase directive", manifest: config("  valkey:\n    maxmemory: 1gb\n    PORT: \"7000\"\n"),
			wantErr: v1alpha1.LowercaseMessage + ": PORT"},
		// The API server drops a message with a line break for the bare rule: the name is
		// quoted with its line breaks escaped.
		{name: "line break in a directive name", manifest: config("  valkey:\n    \"max\\nmemory\": \"1mb\"\n"),
			wantErr: v1alpha1.LowercaseMessage + ": max\\nmemory"},
		{name: "tab in a directive name", manifest: config("  valkey:\n    \"max\\tmemory\": \"1mb\"\n"),
			wantErr: v1alpha1.LowercaseMessage + ": max\\tmemory"},
		// Another control character (a terminal escape) is not echoed at all.
		{name: "escape sequence in a directive name", manifest: config("  valkey:\n    \"max\\e[31mmemory\": \"1mb\"\n"),
			wantErr: v1alpha1.LowercaseMessage + ": a key holding a control or non-ASCII character"},
		{name: "line break in an annotation key", manifest: cluster("  podAnnotations:\n    \"example.com/a\\nb\": \"true\"\n"),
			wantErr: "like example.com/scrape; not example.com/a\\nb"},
		{name: "line break in a nodeSelector key", manifest: cluster("  placement:\n    nodeSelector:\n      \"a\\rb\": cache\n"),
			wantErr: "like node-pool; not a\\rb"},
		{name: "multi-line value smuggling a directive", manifest: config("  valkey:\n    maxmemory: \"1mb\\nport 7000\"\n"),
			wantErr: "valkey directive values must be one line: a line break would start another directive"},
		{name: "carriage return in a value", manifest: config("  valkey:\n    maxmemory-policy: \"allkeys-lru\\r\"\n"),
			wantErr: "valkey directive values must be one line"},
		{name: "unbalanced quote in a value", manifest: config("  valkey:\n    notify-keyspace-events: '\"Ex'\n"),
			wantErr: "valkey directive values must be quoted as valkey.conf reads them"},
		{name: "closing quote followed by a letter", manifest: config("  valkey:\n    save: '\"3600 1\"x'\n"),
			wantErr: "valkey directive values must be quoted as valkey.conf reads them"},
		{name: "owned directive among allowed ones", manifest: config("  valkey:\n    maxmemory: 1gb\n    port: \"7000\"\n    loglevel: debug\n"),
			wantErr: v1alpha1.OwnedDirectiveMessage("port")},
		{name: "zero cpu", manifest: config("  resources:\n    cpu: \"0\"\n"),
			wantErr: `resources.cpu must be greater than zero, like "500m" or "2"`},
		{name: "negative memory", manifest: config("  resources:\n    memory: -1Gi\n"),
			wantErr: `resources.memory must be greater than zero, like "512Mi" or "2Gi"`},

		// ValkeyImage.
		{name: "tag inside the repository", manifest: image("valkey/valkey:9.0.0", "9.0.0", "9.0.0"),
			wantErr: "repository must be an image repository a container runtime can pull, without tag or digest"},
		{name: "digest inside the repository", manifest: image("valkey/valkey@sha256:"+strings.Repeat("ab", 32), "9.0.0", "9.0.0"),
			wantErr: "put the tag (and any digest, like 9.0.0@sha256:…) in spec.tag"},
		{name: "tag starting with a dash", manifest: image("valkey/valkey", "-rc1", "9.0.0"),
			wantErr: "tag must be an image tag a container runtime can pull, like 9.0.0"},
		{name: "tag too long", manifest: image("valkey/valkey", "t"+strings.Repeat("x", 128), "9.0.0"),
			wantErr: "tag must be an image tag a container runtime can pull"},
		{name: "truncated digest", manifest: image("valkey/valkey", "9.0.0@sha256:abc", "9.0.0"),
			wantErr: "optionally pinned by a digest, like 9.0.0@sha256:<64 hex>"},

		// ValkeyRole.
		{name: "unknown rule access", manifest: role("  categories:\n    - name: read\n      access: permit\n"),
			wantErr: `Unsupported value: "permit": supported values: "allow", "deny"`},
		{name: "category with @", manifest: role("  categories:\n    - name: \"@read\"\n      access: allow\n"),
			wantErr: "category name must be a Valkey ACL category without the @"},
		{name: "command with a subcommand in its name", manifest: role("  commands:\n    - name: cluster|info\n      access: allow\n"),
			wantErr: "for cluster|info write name: cluster and subcommand: info"},
		{name: "subcommand with a space", manifest: role("  commands:\n    - name: config\n      subcommand: get all\n      access: deny\n"),
			wantErr: "subcommand must be a single word"},
	})
}

// Every directive the operator owns is refused by the CRD, named in the message. The list is
// the Go one, so a directive added there and not to the CRD fails here.
func TestAdmissionRefusesEveryOwnedDirective(t *testing.T) {
	var cases []admissionCase
	add := func(directive, wantErr string) {
		cases = append(cases, admissionCase{
			name:     directive,
			manifest: config(fmt.Sprintf("  valkey:\n    %s: \"x\"\n", directive)),
			wantErr:  wantErr,
		})
	}
	for _, d := range v1alpha1.OwnedDirectives() {
		add(d, v1alpha1.OwnedDirectiveMessage(d))
	}
	add(v1alpha1.LogfileDirective, v1alpha1.LogfileMessage)
	runAdmissionCases(t, cases)
}

func image(repository, tag, version string) string {
	return fmt.Sprintf(`
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyImage
metadata:
  name: valkey
spec:
  repository: %q
  tag: %q
  version: %q
`, repository, tag, version)
}

func role(spec string) string {
	return `
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyRole
metadata:
  name: read-write
spec:
` + spec
}

// TLS is chosen at creation: it cannot be added, removed or changed afterwards, while every
// other spec field stays editable (the docs' kubectl patch --type merge examples).
func TestAdmissionTLSIsImmutable(t *testing.T) {
	c := apiServer(t)
	ensureNamespace(t, c)

	create := func(t *testing.T, name, extraSpec string) *unstructured.Unstructured {
		t.Helper()
		obj := decode(t, strings.Replace(cluster(extraSpec), "name: my-cluster", "name: "+name, 1))[0]
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Delete(t.Context(), obj) })
		return obj
	}
	patch := func(t *testing.T, obj *unstructured.Unstructured, body string) error {
		t.Helper()
		return c.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, []byte(manifest(body))))
	}
	const tlsSpec = "  tls:\n    secretRef: my-cluster-tls\n"

	tests := []struct {
		name    string
		initial string
		patch   string
		wantErr string
	}{
		{name: "adding tls", initial: "", patch: `{"spec":{"tls":{"secretRef":"my-cluster-tls"}}}`,
			wantErr: "spec.tls cannot be added or removed after the cluster is created"},
		{name: "removing tls", initial: tlsSpec, patch: `{"spec":{"tls":null}}`,
			wantErr: "spec.tls cannot be added or removed after the cluster is created"},
		{name: "changing the tls secret (a rotation)", initial: tlsSpec, patch: `{"spec":{"tls":{"secretRef":"other-tls"}}}`},
		{name: "scaling shards with tls", initial: tlsSpec, patch: `{"spec":{"shards":6}}`},
		{name: "scaling replicas without tls", initial: "", patch: `{"spec":{"replicasPerShard":2}}`},
		{name: "switching config", initial: tlsSpec, patch: `{"spec":{"configRef":"large"}}`},
		{name: "binding a user", initial: tlsSpec, patch: `{"spec":{"acl":[{"username":"app-user","passwordHashes":["<hash>"],"permissions":[{"roleRef":"read-write","keys":[{"pattern":"myapp:*","access":"readwrite"}]}]}]}}`},
		{name: "changing placement and annotations", initial: "", patch: `{"spec":{"placement":{"zones":["us-east-1a"],"zoneSpread":"required"},"podAnnotations":{"prometheus.io/scrape":"true"}}}`},
		{name: "re-sending the same tls", initial: tlsSpec, patch: `{"spec":{"tls":{"secretRef":"my-cluster-tls"},"shards":4}}`},
		{name: "a bad update is still refused by the other rules", initial: tlsSpec, patch: `{"spec":{"shards":0}}`,
			wantErr: "shards must be between 1 and 1000"},
		{name: "scaling replicas past 1000 nodes", initial: "", patch: `{"spec":{"replicasPerShard":333}}`,
			wantErr: "shards × (replicasPerShard + 1) must be at most 1000 nodes"},
		{name: "annotating the pods unconfined", initial: "", patch: `{"spec":{"podAnnotations":{"container.apparmor.security.beta.kubernetes.io/valkey":"unconfined"}}}`,
			wantErr: "would set the AppArmor profile of the cluster's containers"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := create(t, fmt.Sprintf("tls-update-%d", i), tc.initial)
			checkAdmission(t, obj, patch(t, obj, tc.patch), tc.wantErr)
		})
	}
}

// The Go types round-trip through the real API server: what a controller writes with the typed
// client, spec and status subresource alike, is what it reads back.
func TestTypedClusterAndStatusRoundTrip(t *testing.T) {
	c := apiServer(t)
	ensureNamespace(t, c)
	ctx := t.Context()

	vc := &v1alpha1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: testNamespace},
		Spec: v1alpha1.ValkeyClusterSpec{
			ConfigRef:        "standard",
			Shards:           2,
			ReplicasPerShard: 1,
			ACL: []v1alpha1.ACLBinding{{
				Username:       "app-user",
				PasswordHashes: []string{sha256Hex("app-password")},
				Permissions: []v1alpha1.ACLPermission{{
					RoleRef: "read-write",
					Keys:    []v1alpha1.KeyPattern{{Pattern: "myapp:*"}},
				}},
			}},
			Placement: &v1alpha1.Placement{Zones: []string{"zone-a", "zone-b"}},
		},
	}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatalf("create typed cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, vc) })
	if got := vc.Spec.ACL[0].Permissions[0].Keys[0].Access; got != v1alpha1.KeyAccessReadWrite {
		t.Errorf("key access defaulted to %q, want %q", got, v1alpha1.KeyAccessReadWrite)
	}

	vc.Status = v1alpha1.ValkeyClusterStatus{
		State:              v1alpha1.StateForming,
		Message:            "meeting nodes",
		ObservedGeneration: vc.Generation,
		Shards:             2,
		ReadyNodes:         3,
		Nodes:              v1alpha1.NodeNames{"typed-8c04d", "typed-1f2e3", "typed-77aa0", "typed-0b0b0"},
		NodeDetails: []v1alpha1.NodeStatus{
			{Pod: "typed-8c04d", Shard: 0, Role: v1alpha1.NodeRolePrimary, NodeID: strings.Repeat("a", 40), Ready: true, IP: "10.244.0.5"},
			{Pod: "typed-1f2e3", Shard: 0, Role: v1alpha1.NodeRoleReplica, Ready: true},
			{Pod: "typed-77aa0", Shard: 1, Ready: true},
			{Pod: "typed-0b0b0", Shard: 1},
		},
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Forming",
			Message: "meeting nodes", ObservedGeneration: vc.Generation, LastTransitionTime: metav1.Now(),
		}},
	}
	if err := c.Status().Update(ctx, vc); err != nil {
		t.Fatalf("update status: %v", err)
	}
	got := &v1alpha1.ValkeyCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vc), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Status.State != v1alpha1.StateForming || len(got.Status.NodeDetails) != 4 || got.Status.ReadyNodes != 3 ||
		!slices.Equal(got.Status.Nodes, vc.Status.Nodes) ||
		got.Status.NodeDetails[0].NodeID != vc.Status.NodeDetails[0].NodeID || len(got.Status.Conditions) != 1 {
		t.Errorf("status read back as %+v, want what was written: %+v", got.Status, vc.Status)
	}

	got.Status.State = "Creating"
	err := c.Status().Update(ctx, got)
	checkAdmission(t, &unstructured.Unstructured{Object: map[string]any{"kind": "ValkeyCluster", "metadata": map[string]any{"name": "typed"}}},
		err, `Unsupported value: "Creating"`)
}

// Every integer of the status has schema bounds (README, "Moving from the original"): the
// operator alone writes status, and the bounds are wide enough never to refuse what it writes,
// but a value its Go types cannot hold is refused rather than stored.
func TestAdmissionStatusBounds(t *testing.T) {
	c := apiServer(t)
	ensureNamespace(t, c)
	ctx := t.Context()
	vc := &v1alpha1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "status-bounds", Namespace: testNamespace},
		Spec:       v1alpha1.ValkeyClusterSpec{ConfigRef: "standard", Shards: 3, ReplicasPerShard: 1},
	}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, vc) })
	obj := &unstructured.Unstructured{Object: map[string]any{"kind": "ValkeyCluster", "metadata": map[string]any{"name": vc.Name}}}
	for _, tc := range []struct {
		name    string
		status  string
		wantErr string
	}{
		{name: "the widest status the operator writes", status: fmt.Sprintf(
			`{"observedGeneration":%d,"shards":16384,"readyNodes":2147483647,"nodes":["a","b"],"nodeDetails":[{"pod":"a","shard":-1,"ready":false},{"pod":"b","shard":2147483647,"ready":true}],"failover":{"shard":16383,"pod":"b","primaryNodeId":"x","startedAt":"2026-01-01T00:00:00Z"}}`,
			v1alpha1.MaxExactJSONInteger)},
		{name: "a generation past 2^53", status: `{"observedGeneration":9007199254740992}`,
			wantErr: "status.observedGeneration: Invalid value: 9007199254740992: observedGeneration in body should be less than or equal to 9007199254740991"},
		{name: "more shards than slots", status: `{"shards":16385}`,
			wantErr: "status.shards: Invalid value: 16385: shards in body should be less than or equal to 16384"},
		{name: "ready nodes past int32", status: `{"readyNodes":2147483648}`,
			wantErr: "readyNodes in body should be less than or equal to 2147483647"},
		{name: "a node's shard past int32", status: `{"nodeDetails":[{"pod":"a","shard":2147483648,"ready":true}]}`,
			wantErr: "nodeDetails[0].shard in body should be less than or equal to 2147483647"},
		{name: "a failover of a shard past the slots", status: `{"failover":{"shard":16384,"pod":"b","primaryNodeId":"x","startedAt":"2026-01-01T00:00:00Z"}}`,
			wantErr: "status.failover.shard: Invalid value: 16384: failover.shard in body should be less than or equal to 16383"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"status":` + tc.status + `}`)
			err := c.Status().Patch(ctx, vc.DeepCopy(), client.RawPatch(types.MergePatchType, body))
			checkAdmission(t, obj, err, tc.wantErr)
		})
	}
}

// podAnnotationCases are spec.podAnnotations that must be allowed (wantErr empty) or refused
// with a message containing wantErr. TestCheckPodAnnotations runs them through the Go check;
// TestAdmissionPodAnnotations sends them to the API server, which must give the same verdict
// with the Go check's message word for word.
func podAnnotationCases() []struct {
	name        string
	annotations map[string]string
	wantErr     string
} {
	const big = "example.com/big"
	return []struct {
		name        string
		annotations map[string]string
		wantErr     string
	}{
		{name: "scrape and default container", annotations: map[string]string{
			"prometheus.io/scrape": "true", "kubectl.kubernetes.io/default-container": "valkey"}},
		{name: "look-alikes of the confinement keys", annotations: map[string]string{
			"example.com/apparmor": "note", "apparmor.security.beta.kubernetes.io/allowedProfileNames": "runtime/default",
			"example.com/seccomp": "audit"}},
		{name: "a prefix of 253 characters", annotations: map[string]string{strings.Repeat("a", 253) + "/x": "1"}},
		{name: "exactly the size bound", annotations: map[string]string{big: strings.Repeat("x", v1alpha1.MaxPodAnnotationsBytes-len(big))}},

		{name: "AppArmor unconfined for the valkey container",
			annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/valkey": "unconfined", "prometheus.io/scrape": "true"},
			wantErr:     "podAnnotations key container.apparmor.security.beta.kubernetes.io/valkey would set the AppArmor profile of the cluster's containers"},
		{name: "AppArmor for any container",
			annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/sidecar": "runtime/default"},
			wantErr:     "would set the AppArmor profile"},
		{name: "seccomp of the pod",
			annotations: map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"},
			wantErr:     "podAnnotations key seccomp.security.alpha.kubernetes.io/pod would set the seccomp profile of the cluster's pods, which the operator sets itself (RuntimeDefault)"},
		{name: "seccomp of a container",
			annotations: map[string]string{"container.seccomp.security.alpha.kubernetes.io/valkey": "runtime/default"},
			wantErr:     "would set the seccomp profile"},
		{name: "reserved prefix",
			annotations: map[string]string{"valkey.gomomento.com/spec-hash": "forged"},
			wantErr:     "uses the prefix valkey.gomomento.com/, which is reserved for the operator"},
		{name: "not an annotation key",
			annotations: map[string]string{"scrape me": "true"},
			wantErr:     "podAnnotations keys must be annotation keys"},
		{name: "a prefix of 254 characters",
			annotations: map[string]string{strings.Repeat("a", 254) + "/x": "1"},
			wantErr:     "podAnnotations key prefixes (before the '/') must be at most 253 characters"},
		{name: "one byte over the size bound",
			annotations: map[string]string{big: strings.Repeat("x", v1alpha1.MaxPodAnnotationsBytes-len(big)+1)},
			wantErr:     "podAnnotations may hold at most 131072 bytes, keys and values together: Kubernetes refuses a pod whose annotations exceed 262144 bytes"},
		{name: "bytes, not characters",
			annotations: map[string]string{"example.com/accents": strings.Repeat("é", 65530)},
			wantErr:     "podAnnotations may hold at most 131072 bytes"},
		{name: "the size of all of them together", annotations: func() map[string]string {
			m := map[string]string{}
			for i := range 64 {
				m[fmt.Sprintf("example.com/part-%02d", i)] = strings.Repeat("x", 2100)
			}
			return m
		}(),
			wantErr: "podAnnotations may hold at most 131072 bytes"},
	}
}

func TestCheckPodAnnotations(t *testing.T) {
	for _, tc := range podAnnotationCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := v1alpha1.CheckPodAnnotations(tc.annotations)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	if err := v1alpha1.CheckPodAnnotations(nil); err != nil {
		t.Errorf("no annotations refused: %v", err)
	}
}

// The CRD refuses what CheckPodAnnotations refuses, with its message, and accepts the rest.
func TestAdmissionPodAnnotations(t *testing.T) {
	var cases []admissionCase
	for _, tc := range podAnnotationCases() {
		var lines strings.Builder
		for _, k := range slices.Sorted(maps.Keys(tc.annotations)) {
			fmt.Fprintf(&lines, "    %q: %q\n", k, tc.annotations[k])
		}
		c := admissionCase{name: tc.name, manifest: cluster("  podAnnotations:\n" + lines.String())}
		if err := v1alpha1.CheckPodAnnotations(tc.annotations); err != nil {
			c.wantErr = err.Error()
		}
		cases = append(cases, c)
	}
	runAdmissionCases(t, cases)
}
