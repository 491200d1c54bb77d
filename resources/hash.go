package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
)

// NodeSpecHash hashes what a node is built from, its ValkeyNode's spec, reduced to what the
// change-impact table (concepts/reconciliation.md) says requires replacing it: the image,
// resources, every valkey setting, placement.zones compared as a set, placement.nodeSelector
// and the name of the TLS Secret (a pod's volumes cannot change, so a node mounting another
// Secret than tls.secretRef names is replaced; the Secret's content is reloaded in place).
// Nothing else: not the config chain's names, not key order, not zoneSpread (future pods only),
// not the paths of the node's files (pathDirectives),
// and not the operator's shutdownFailover default, which only makes a node leave more gracefully:
// an operator upgrade that adds it must not roll every pod. Nor the settings Valkey takes at run
// time (liveconf): the settings planner applies those with CONFIG SET, so a change of them alone
// replaces no pod. Both sides of the comparison drop them, so the operator upgrade that
// introduced this rolls nothing either. The same function hashes a live node's recorded spec and the spec a node created now
// would get, so "outdated" is exactly "built from something else".
func NodeSpecHash(spec *v1.ValkeyNodeSpec) string {
	return specHash(spec, true)
}

// ShapeHash is NodeSpecHash without the CPU and memory: two nodes of one shape differ at most in
// what an in-place resize changes (plan/resize.go), so a node whose spec hash is outdated but
// whose shape hash is current can be resized instead of replaced.
func ShapeHash(spec *v1.ValkeyNodeSpec) string {
	return specHash(spec, false)
}

func specHash(spec *v1.ValkeyNodeSpec, size bool) string {
	cpu, memory := "", ""
	if size {
		cpu, memory = canonicalQuantity(spec.CPU), canonicalQuantity(spec.Memory)
	}
	settings := liveconf.WithoutLive(spec.ValkeySettings)
	for _, k := range pathDirectives {
		delete(settings, k)
	}
	if settings[shutdownFailover[0]] == shutdownFailover[1] {
		delete(settings, shutdownFailover[0])
	}
	var zones []string
	var selector map[string]string
	if p := spec.Placement; p != nil {
		zones = slices.Compact(slices.Sorted(slices.Values(p.Zones)))
		selector = p.NodeSelector
	}
	if len(selector) == 0 {
		selector = nil
	}
	data, _ := json.Marshal(struct {
		Image, CPU, Memory string
		Settings           map[string]string
		Zones              []string
		NodeSelector       map[string]string
	}{spec.Image, cpu, memory, settings, zones, selector})
	if spec.TLSSecret != "" {
		// Appended only when set, so that the hash of a node without TLS is what it always was.
		data = append(data, "\x00tls="+spec.TLSSecret...)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// pathDirectives are the operator's own directives whose value is a path inside the pod (where
// the operator lays out the node's files), which no ValkeyConfig may set. Where a node keeps its
// files is not what it is built from: a node recorded with other paths (an older operator's,
// /data and /etc/valkey-secret) is not outdated, so the operator upgrade that moved them to the
// original's replaced no pod; each node gets the new paths when it is next replaced.
var pathDirectives = []string{"dir", "cluster-config-file", "aclfile", "include", "tls-cert-file", "tls-key-file", "tls-ca-cert-file"}

// StartSpecHash is NodeSpecHash with the live settings too (their values as written): what a
// node starts from. It only tells whether a pod that failed on
// start failed on the current spec (fsm.Pod.StartHash); it never outdates a running node.
func StartSpecHash(spec *v1.ValkeyNodeSpec) string {
	live := liveconf.Live(spec.ValkeySettings)
	var b strings.Builder
	b.WriteString(NodeSpecHash(spec))
	for _, k := range slices.Sorted(maps.Keys(live)) {
		// As written (unquoted), not as Valkey compares it: any edit of a value that failed on
		// start is a new spec to try.
		fmt.Fprintf(&b, "\x00%s=%s", k, liveconf.Unquote(live[k]))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// canonicalQuantity is q's value in thousandths ("1000m", "1" and "1.0" are all 1000;
// "128Mi" and "134217728" are the same memory), or q itself when it does not parse (then it is
// compared as written).
func canonicalQuantity(q string) string {
	if q == "" {
		return ""
	}
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return q
	}
	return strconv.FormatInt(v.MilliValue(), 10)
}
