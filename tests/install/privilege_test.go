package install

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// Least privilege, checked against what the operator really does: the API server's audit log
// (localcluster.Cluster.AuditLog) holds every request the operator's ServiceAccount made while it
// formed the sample, scaled it out and in, changed its pods' annotations and its ACL. Every
// (verb, resource) that `kubectl auth can-i --list` shows the ServiceAccount may do must be among
// those requests, or among rareCalls (each naming the code that makes it). A grant the operator
// only uses in its own namespace (the leader-election Lease) must not reach any other.

// operatorNamespace is where the operator runs (manifests/operator.yaml).
const operatorNamespace = "valkey-operator"

// rareCalls are the grants whose requests the install test does not provoke, each with the code
// that makes them: they are allowed without a matching request in the audit log.
var rareCalls = map[string]string{
	// checkCollision (controllers/creates.go): the name of a node's ConfigMap was taken.
	"get configmaps": "a node's {node}-config ConfigMap already exists (createNode, checkCollision)",
	"get pods":       "a node's pod already exists (createNode, checkCollision), or a ValkeyNode's pod is not among the pods with the cluster label (controllers/identity.go, unlistedPods)",
	// ensureObjects (controllers/valkeycluster_controller.go): a Service an older operator made.
	"patch services": "a Service created by an operator before the original's port names and selector (ensureObjects)",
	// client-go's events broadcaster: the same Event again within 6 minutes becomes a series.
	"patch events.events.k8s.io": "an Event repeated within 6 minutes (client-go's events broadcaster patches its series)",
}

// defaultGrants are what every authenticated user may do (the system:basic-user and
// system:discovery roles), not the operator's ClusterRole.
var defaultGrants = []string{
	"selfsubjectreviews.authentication.k8s.io",
	"selfsubjectaccessreviews.authorization.k8s.io",
	"selfsubjectrulesreviews.authorization.k8s.io",
	// system:cluster-trust-bundle-discovery, bound to every authenticated user.
	"clustertrustbundles.certificates.k8s.io",
}

// exerciseDay2 makes the operator use its day-2 grants on the sample: a ValkeyRole and an ACL
// binding (the ACL Secret is updated), a pod annotation (pods are patched), a second shard
// (ValkeyNodes, ConfigMaps, pods and a PodDisruptionBudget created, slots moved), then back to one
// (a PodDisruptionBudget and ValkeyNodes deleted), a setting applied live and more memory
// (ConfigMaps and ValkeyNodes updated, pods resized in place), the client port narrowed (the NetworkPolicy patched) and the policy
// turned off (deleted).
func exerciseDay2(t *testing.T, c *localcluster.Cluster, k8s client.Client) {
	t.Helper()
	role := `apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyRole
metadata:
  name: read-write
spec:
  categories:
    - name: read
      access: allow
    - name: write
      access: allow
`
	if _, err := harness.Kubectl(c, []byte(role), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	user(t, c, `kubectl -n my-app patch valkeycluster my-cluster --type merge -p '{"spec":{"shards":2,"podAnnotations":{"example.com/team":"checkout"},`+
		`"acl":[{"username":"app","passwordHashes":["`+hash+`"],"permissions":[{"roleRef":"read-write","keys":[{"pattern":"*"}]}]}]}}'`)
	waitShards(t, k8s, 2)
	user(t, c, `kubectl -n my-app patch valkeycluster my-cluster --type merge -p '{"spec":{"shards":1}}'`)
	waitShards(t, k8s, 1)
	// A setting applied live: every node's ConfigMap and ValkeyNode record it (update configmaps).
	// Raised: a lower maxmemory evicts, and waits for a confirmation. With more memory, which the
	// pods take in place (patch pods/resize) and their ValkeyNodes record.
	user(t, c, `kubectl patch valkeyconfig standard --type merge -p '{"spec":{"resources":{"memory":"384Mi"},"valkey":{"maxmemory":"220mb"}}}'`)
	waitFor(t, "every ValkeyNode of the sample to record maxmemory 220mb and 384Mi", func() (bool, string) {
		var nodes v1.ValkeyNodeList
		if err := k8s.List(context.Background(), &nodes, client.InNamespace(sampleKey.Namespace)); err != nil {
			return false, err.Error()
		}
		var got []string
		done := len(nodes.Items) > 0
		for _, n := range nodes.Items {
			v := n.Spec.ValkeySettings["maxmemory"]
			got = append(got, n.Name+": "+v+", "+n.Spec.Memory)
			done = done && v == "220mb" && n.Spec.Memory == "384Mi"
		}
		return done, strings.Join(got, ", ")
	})
	// The NetworkPolicy: patched for spec.network.clients, deleted once turned off.
	user(t, c, `kubectl -n my-app patch valkeycluster my-cluster --type merge -p '{"spec":{"network":{"clients":[{"podSelector":{"matchLabels":{"valkey-client":"true"}}}]}}}'`)
	waitFor(t, "the NetworkPolicy to admit only the listed clients", func() (bool, string) {
		var np networkingv1.NetworkPolicy
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: sampleKey.Namespace, Name: v1.NetworkPolicyName(sampleKey.Name)}, &np); err != nil {
			return false, err.Error()
		}
		rules := np.Spec.Ingress
		return len(rules) == 3 && len(rules[2].From) == 1, fmt.Sprintf("%d rules", len(rules))
	})
	user(t, c, `kubectl -n my-app patch valkeycluster my-cluster --type merge -p '{"spec":{"network":{"policy":"Disabled"}}}'`)
	waitFor(t, "the NetworkPolicy deleted", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: sampleKey.Namespace, Name: v1.NetworkPolicyName(sampleKey.Name)}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// waitShards waits until the sample is Active, Ready, with n shards of two nodes each.
func waitShards(t *testing.T, k8s client.Client, n int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the sample Ready with %d shards", n), func() (bool, string) {
		var vc v1.ValkeyCluster
		if err := k8s.Get(context.Background(), sampleKey, &vc); err != nil {
			return false, err.Error()
		}
		ok := vc.Status.State == v1.StateActive && vc.Status.Shards == n && vc.Status.ReadyNodes == 2*n && vc.Status.Message == "" &&
			vc.Status.ObservedGeneration == vc.Generation
		return ok, fmt.Sprintf("state %s, %d shards, %d ready nodes, message %q", vc.Status.State, vc.Status.Shards, vc.Status.ReadyNodes, vc.Status.Message)
	})
}

// call is one request as the audit log records it: "verb resource" (resource with its group and
// subresource, as `kubectl auth can-i --list` prints it: pods, valkeyclusters.valkey.gomomento.com/status).
type call struct{ verb, resource string }

// auditCalls reads the audit log: each call the operator made, with the namespaces it made it in
// ("" for a cluster-scoped resource).
func auditCalls(t *testing.T, path string) map[call]map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[call]map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource, Namespace, APIGroup, Subresource string
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if e.User.Username != localcluster.AuditedUser || e.ObjectRef == nil {
			continue
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.APIGroup != "" {
			r += "." + e.ObjectRef.APIGroup
		}
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		k := call{e.Verb, r}
		if out[k] == nil {
			out[k] = map[string]bool{}
		}
		out[k][e.ObjectRef.Namespace] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// canIRow matches a row of `kubectl auth can-i --list`: the resource, the non-resource URLs, the
// resource names, then the verbs in brackets.
var canIRow = regexp.MustCompile(`^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$`)

// canIList is what the operator's ServiceAccount may do in namespace ns, as "verb resource" calls
// (the default grants of every user and non-resource URLs left out).
func canIList(t *testing.T, c *localcluster.Cluster, ns string) []call {
	t.Helper()
	out, err := harness.Kubectl(c, nil, "auth", "can-i", "--list", "--as="+localcluster.AuditedUser, "-n", ns)
	if err != nil {
		t.Fatalf("kubectl auth can-i --list -n %s: %v\n%s", ns, err, out)
	}
	var calls []call
	for _, line := range strings.Split(string(out), "\n")[1:] {
		m := canIRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] == "" || slices.Contains(defaultGrants, m[1]) {
			continue
		}
		if m[3] != "" {
			t.Errorf("a grant limited to resource names %q: %s", m[3], line)
		}
		for _, verb := range strings.Fields(m[4]) {
			calls = append(calls, call{verb, m[1]})
		}
	}
	if len(calls) == 0 {
		t.Fatalf("kubectl auth can-i --list -n %s listed nothing:\n%s", ns, out)
	}
	return calls
}

// checkGrantsAreCalled: in a team's namespace, the operator's namespace and kube-system, every
// grant is a call the operator made (in a namespace other than its own: clusters live in any
// namespace, so such a grant is cluster-wide by design; a call made only in its own namespace
// justifies the grant there alone), or one of rareCalls. Everything else is extra.
func checkGrantsAreCalled(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	calls := auditCalls(t, c.AuditLog)
	var made []string
	for k, nss := range calls {
		made = append(made, fmt.Sprintf("%s %s %v", k.verb, k.resource, slices.Sorted(maps.Keys(nss))))
	}
	sort.Strings(made)
	t.Logf("the operator's requests (verb, resource, namespaces):\n  %s", strings.Join(made, "\n  "))
	for _, ns := range []string{"my-app", operatorNamespace, "kube-system"} {
		for _, g := range canIList(t, c, ns) {
			nss := calls[g]
			if g.verb == "list" {
				// An informer lists before it watches, unless the API server streams the initial
				// list in the watch (WatchList, as 1.37 does here): a watch justifies the list
				// that older API servers (the floor is 1.29) are sent.
				nss = calls[call{"watch", g.resource}]
			}
			teamWide := false
			for n := range nss {
				teamWide = teamWide || n != operatorNamespace
			}
			if teamWide || nss[ns] {
				continue
			}
			if why, ok := rareCalls[g.verb+" "+g.resource]; ok {
				t.Logf("%s %s in %s: not seen, allowed for %s", g.verb, g.resource, ns, why)
				continue
			}
			t.Errorf("the operator may %s %s in namespace %s, but never does (seen in %v): remove the grant", g.verb, g.resource, ns, slices.Sorted(maps.Keys(nss)))
		}
	}
}

// checkMetricsEndpoint scrapes the installed operator's metrics as a Prometheus would: over HTTPS
// at its pod's port https, with the token of a ServiceAccount bound to the shipped
// valkey-operator-metrics-reader. Without a token the endpoint answers 401, with one of a subject
// not bound 403; bound, 200 with the sample's series.
func checkMetricsEndpoint(t *testing.T, c *localcluster.Cluster, k8s client.Client) {
	t.Helper()
	user(t, c, `kubectl -n valkey-operator create serviceaccount prometheus`)
	user(t, c, `kubectl -n valkey-operator create serviceaccount nobody`)
	user(t, c, `kubectl create clusterrolebinding prometheus-valkey-metrics --clusterrole=valkey-operator-metrics-reader --serviceaccount=valkey-operator:prometheus`)
	pod := operatorPod(t, k8s)
	url := "https://" + pod.Status.PodIP + ":8443/metrics"
	get := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The operator serves a self-signed certificate unless one is mounted.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d, want 401", code)
	}
	if code, _ := get(strings.TrimSpace(user(t, c, `kubectl -n valkey-operator create token nobody`))); code != http.StatusForbidden {
		t.Errorf("metrics with the token of a ServiceAccount not bound to the reader role: %d, want 403", code)
	}
	code, body := get(strings.TrimSpace(user(t, c, `kubectl -n valkey-operator create token prometheus`)))
	if code != http.StatusOK {
		t.Fatalf("metrics with the reader's token: %d\n%s", code, body)
	}
	for _, want := range []string{
		`valkey_cluster_state{cluster="my-cluster",namespace="my-app",state="Active"} 1`,
		`valkey_cluster_ready{cluster="my-cluster",namespace="my-app"} 1`,
		`valkey_node_up{cluster="my-cluster",namespace="my-app"`,
		`controller_runtime_reconcile_total{controller="valkeycluster"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	t.Logf("a scrape of the operator's metrics: %d bytes", len(body))
}
