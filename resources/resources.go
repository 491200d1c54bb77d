// Package resources builds the objects the operator creates for a cluster, as they should be:
// the ValkeyNode record, its pod and its valkey.conf ConfigMap, the headless Service, the ACL
// and credential Secrets and the shard disruption budgets; and the spec hash that says whether a
// running node was built from the current spec. Pure: controllers compares, creates and patches.
// The pod, ConfigMap and ValkeyNode are pinned by golden files (testdata), so that a change that
// would roll every pod through the spec hash is a reviewed decision.
package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial"
)

// Ports and paths inside a Valkey pod.
const (
	// ClientPort is the port clients (and the operator) reach a node on, TLS or not.
	ClientPort = 6379
	// BusPort is the cluster bus port.
	BusPort = 16379

	// The original's paths (reference/forced-settings.md, reference/api/valkeynode.md): the
	// data directory and nodes.conf under /var/lib/valkey, the ACL file under /etc/valkey/acl,
	// the TLS files under /etc/valkey/tls. valkey.conf, whose path the original does not give,
	// is beside them in /etc/valkey/conf: each volume has its own directory, because a mount
	// nested inside a ConfigMap or Secret volume needs its mount point created in a read-only
	// volume. Pods an older operator made keep their paths (/etc/valkey, /etc/valkey-secret,
	// /etc/valkey-tls, /data) until they are replaced for another reason: the paths are not part
	// of the spec hash (NodeSpecHash).
	configMountPath = "/etc/valkey/conf"
	secretMountPath = "/etc/valkey/acl"
	dataMountPath   = "/var/lib/valkey"

	// ConfigFileName is valkey.conf's key in a node's ConfigMap (and its file in the pod).
	ConfigFileName = "valkey.conf"
	// ACLFileName is the ACL file's key in the cluster's ACL Secret (and its file in the pod).
	ACLFileName = "users.acl"
	// AuthFileName is auth.conf's key in the same Secret: masteruser / masterauth.
	AuthFileName = "auth.conf"

	// OperatorPasswordKey is the key of the operator's password in its credential Secret, as
	// in the original's (security/index.md).
	OperatorPasswordKey = "operator-password"
	// ReplPasswordKey is the key of the replication user's password in the same Secret.
	ReplPasswordKey = "repl-password"
	// LegacyOperatorPasswordKey is where operators before the original's key names kept the
	// operator's password; a Secret they made keeps it there (the nodes hold its hash).
	LegacyOperatorPasswordKey = "password"
	// LegacyMigratePasswordKey is where those operators kept the migration user's password; a
	// Secret without it derives the password from the operator's (MigratePassword).
	LegacyMigratePasswordKey = "migrate-password"
	// OperatorPasswordNextKey and ReplPasswordNextKey hold the next passwords while a rotation
	// of the system users' passwords is under way (rotation.go): written before any node is
	// given them, made the current ones when the old ones are retired.
	OperatorPasswordNextKey = "operator-password-next"
	ReplPasswordNextKey     = "repl-password-next"

	// valkeyUID runs valkey-server (the uid of the valkey user in the official images).
	valkeyUID = 999

	// ClusterNodeTimeoutMS is cluster-node-timeout: how long a node may be silent before it is
	// flagged failed, so also how soon Valkey fails over on its own.
	ClusterNodeTimeoutMS = 5000
)

// Names of the objects the operator creates for a cluster (the documented ones are in
// apis/v1alpha1/names.go).

// ACLSecretName is the name of the cluster's Secret holding the ACL file and auth.conf.
func ACLSecretName(vc *v1.ValkeyCluster) string { return vc.Name + "-acl" }

// CredentialSecretName is the name of the cluster's Secret holding the system users' passwords.
func CredentialSecretName(vc *v1.ValkeyCluster) string { return v1.OperatorAuthSecretName(vc.Name) }

// ServiceName is the name of the cluster's headless Service.
func ServiceName(vc *v1.ValkeyCluster) string { return vc.Name }

// The original's documented pod labels (reference/labels-annotations.md), on every object the
// operator creates for a cluster: LabelName=LabelNameValue on all of them, LabelInstance the
// cluster's name. The Service selects on them.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelNameValue = "valkey"
	LabelInstance  = "app.kubernetes.io/instance"
	// LabelManagedBy says which tool manages the object (valkey-operator).
	LabelManagedBy = "app.kubernetes.io/managed-by"
)

// clusterLabels are on every object the operator creates for vc.
func clusterLabels(vc *v1.ValkeyCluster) map[string]string {
	return map[string]string{
		v1.LabelCluster: vc.Name,
		LabelName:       LabelNameValue,
		LabelInstance:   vc.Name,
		LabelManagedBy:  "valkey-operator",
	}
}

// OwnerRef is the controller reference to vc that every object of the cluster carries (those
// of a node carry their ValkeyNode's instead).
func OwnerRef(vc *v1.ValkeyCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(vc, v1.GroupVersion.WithKind("ValkeyCluster"))
}

// ObjectMeta is the metadata of the cluster's object named name: the cluster's namespace and
// labels, and vc as controller.
func ObjectMeta(vc *v1.ValkeyCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       vc.Namespace,
		Labels:          clusterLabels(vc),
		OwnerReferences: []metav1.OwnerReference{OwnerRef(vc)},
	}
}

// nodeObjectMeta is the metadata of an object owned by the ValkeyNode vn: the cluster's labels
// (so that watches and selectors find the cluster) and vn as controller.
func nodeObjectMeta(vc *v1.ValkeyCluster, vn *v1.ValkeyNode, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       vc.Namespace,
		Labels:          clusterLabels(vc),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vn, v1.GroupVersion.WithKind("ValkeyNode"))},
	}
}

// A TLS cluster's nodes mount its Secret at TLSMountPath, and valkey.conf points Valkey at the
// three files there (tlsmaterial's CertKey, KeyKey, CAKey). The path is beside the ACL Secret's
// (secretMountPath) and the config's, not under either: a mount nested inside a ConfigMap or
// Secret volume needs its mount point created in a read-only volume.
const TLSMountPath = "/etc/valkey/tls"

// TLSFileParams are the CONFIG SET parameters that point pod's node at its mounted certificate
// files, which makes it re-read them: under the pod's own mount of the TLS Secret (a pod an older
// operator made mounts it at /etc/valkey-tls), TLSMountPath when the pod has none.
func TLSFileParams(pod *corev1.Pod) map[string]string {
	dir := TLSMountPath
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == TLSVolume {
				dir = m.MountPath
			}
		}
	}
	return map[string]string{
		"tls-cert-file":    dir + "/" + tlsmaterial.CertKey,
		"tls-key-file":     dir + "/" + tlsmaterial.KeyKey,
		"tls-ca-cert-file": dir + "/" + tlsmaterial.CAKey,
	}
}

// TLSVolume names the TLS Secret's volume in a pod.
const TLSVolume = "tls"

// ResolvedConfig is a ValkeyConfig with its baseRef chain merged and its image resolved.
type ResolvedConfig struct {
	// Chain is the config names from the cluster's configRef to the root base.
	Chain []string
	// Image is the ValkeyImage the chain resolves to.
	Image v1.ValkeyImageSpec
	// Resources are the merged cpu / memory (nil fields: not set anywhere in the chain).
	Resources v1.ValkeyResources
	// Valkey is the merged valkey.conf directive map (child keys win).
	Valkey map[string]string
	// ACL is the config-level bindings: those of the first config up the chain (from the
	// cluster's configRef towards the root) that sets acl at all, replacing, never merging with,
	// its bases'. An explicit empty list there clears the inherited bindings.
	ACL []v1.ACLBinding
	// Confirmations are the chain's valkey.gomomento.com/confirm-live-settings annotations, one
	// text per config that has one (liveconf.ParseConfirmations).
	Confirmations []string
}
