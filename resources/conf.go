package resources

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/version"
)

// RenderValkeyConf renders valkey.conf: the operator's own directives, then the merged
// ValkeyConfig directives sorted by name. Neither logfile nor loglevel is set unless the
// ValkeyConfig does, so node logs go to stdout. Secrets are not here: they are in the
// included auth.conf of the cluster's Secret. announce is the node's DNS name in a TLS
// cluster, which it announces (cluster-announce-hostname) and its certificate covers; "" for a
// cluster without TLS. It is the one per-node line, so it is not among the node's recorded
// settings (ValkeySettings), which must be the same on every node built from one spec.
func RenderValkeyConf(rc *ResolvedConfig, announce string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rendered by valkey-operator from ValkeyConfig %s. Do not edit.\n", strings.Join(rc.Chain, " <- "))
	for _, kv := range confDirectives(rc, announce != "") {
		fmt.Fprintf(&b, "%s %s\n", kv[0], kv[1])
	}
	if announce != "" {
		fmt.Fprintf(&b, "cluster-announce-hostname %s\n", announce)
	}
	return b.String()
}

// ValkeySettings are the directives of RenderValkeyConf as a map, for a ValkeyNode's spec.
func ValkeySettings(rc *ResolvedConfig, withTLS bool) map[string]string {
	out := map[string]string{}
	for _, kv := range confDirectives(rc, withTLS) {
		out[kv[0]] = kv[1]
	}
	return out
}

// confDirectives are the lines of valkey.conf in order: the operator's own directives (with
// TLS, the plaintext port closed and the TLS-mode directives after them), its overridable
// defaults, then the merged ValkeyConfig directives sorted by name. A ValkeyConfig cannot set
// tls-* or cluster-* directives (admission refuses them), so the TLS lines are never
// overridden.
func confDirectives(rc *ResolvedConfig, withTLS bool) [][2]string {
	port := strconv.Itoa(ClientPort)
	if withTLS {
		port = "0"
	}
	owned := [][2]string{
		{"port", port},
		{"bind", "0.0.0.0"},
		// Clients come from other pods; access is governed by the ACL file instead.
		{"protected-mode", "no"},
		{"daemonize", "no"},
		{"dir", dataMountPath},
		{"cluster-enabled", "yes"},
		{"cluster-config-file", dataMountPath + "/nodes.conf"},
		{"cluster-node-timeout", strconv.Itoa(ClusterNodeTimeoutMS)},
		{"cluster-port", strconv.Itoa(BusPort)},
		{"aclfile", secretMountPath + "/" + ACLFileName},
		{"include", secretMountPath + "/" + AuthFileName},
	}
	out := owned
	if withTLS {
		out = append(out, tlsDirectives()...)
	}
	// Tunables with an operator default that a ValkeyConfig may override: a replaced pod is a
	// new node that resyncs from its primary, so nothing needs to be on disk by default.
	defaults := [][2]string{{"appendonly", "no"}, {"save", `""`}}
	if version.Parse(rc.Image.Version).HandsOverOnSIGTERM() {
		defaults = append(defaults, shutdownFailover)
	}
	for _, kv := range defaults {
		if _, set := rc.Valkey[kv[0]]; !set {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rc.Valkey)) {
		out = append(out, [2]string{k, rc.Valkey[k]})
	}
	return out
}

// Replica migration (cluster-allow-replica-migration) keeps Valkey's default, yes, as the
// original does, though a replica Valkey moves to another shard's primary strays from the
// operator's shards: the misplaced planner (plan/misplaced.go) brings it back without ever
// retiring a needed copy. With no, tried as a default, a graceful failover sometimes left the
// old primary a primary without slots but with its keys, which can then be neither replicated
// nor reset: rolling upgrades stalled (TestUpgrade8To9, TestRollingConfigChangeTwoClusters).
// A ValkeyConfig may set it either way.

// shutdownFailover makes a 9.x primary that receives SIGTERM (its pod deleted) hand its slots
// to a synced replica before it exits, so that a drain refuses no write. Valkey 8 rejects the
// value (its shutdown-on-sigterm knows default, save, nosave, now and force): there the pod's
// preStop delay gives the operator time for a graceful CLUSTER FAILOVER instead.
var shutdownFailover = [2]string{"shutdown-on-sigterm", "failover"}

// tlsDirectives are the directives of a TLS cluster's valkey.conf (reference/forced-settings.md,
// TLS mode) shared by every node: the plaintext port closed, TLS on the client port, the cluster
// bus and replication, the mounted Secret's files, no client certificates asked of clients (ACL
// users authenticate them), and hostnames in redirects so that clients verify what they reach.
// The per-node cluster-announce-hostname is added at render time (RenderValkeyConf).
func tlsDirectives() [][2]string {
	return [][2]string{
		{"tls-port", fmt.Sprint(ClientPort)},
		{"tls-cluster", "yes"},
		{"tls-replication", "yes"},
		{"tls-cert-file", TLSMountPath + "/" + tlsmaterial.CertKey},
		{"tls-key-file", TLSMountPath + "/" + tlsmaterial.KeyKey},
		{"tls-ca-cert-file", TLSMountPath + "/" + tlsmaterial.CAKey},
		{"tls-auth-clients", "no"},
		{"cluster-preferred-endpoint-type", "hostname"},
	}
}
