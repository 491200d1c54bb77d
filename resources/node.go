package resources

import (
	"crypto/rand"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// BuildValkeyNode returns the record of a new node of shard, named name, in lifecycle Joining.
// joinType is the valkey.gomomento.com/join-type label ("" for a founding member).
func BuildValkeyNode(vc *v1.ValkeyCluster, rc *ResolvedConfig, name string, shard int, joinType v1.JoinType) *v1.ValkeyNode {
	meta := ObjectMeta(vc, name)
	if joinType != "" {
		meta.Labels[v1.LabelJoinType] = string(joinType)
	}
	vn := &v1.ValkeyNode{
		ObjectMeta: meta,
		Spec: v1.ValkeyNodeSpec{
			ClusterName:    vc.Name,
			Image:          rc.Image.Image(),
			CPU:            quantity(rc.Resources.CPU),
			Memory:         quantity(rc.Resources.Memory),
			ValkeySettings: ValkeySettings(rc, vc.Spec.TLS != nil),
			ShardIndex:     int32(shard),
			Placement:      vc.Spec.Placement.DeepCopy(),
			Lifecycle:      v1.LifecycleJoining,
		},
	}
	if vc.Spec.TLS != nil {
		vn.Spec.TLSSecret = vc.Spec.TLS.SecretRef
	}
	return vn
}

// BuildNodeConfigMap holds the node's rendered valkey.conf, owned by its ValkeyNode. It is
// created with the node; only its live settings are rewritten afterwards (controllers, liveConf), once they
// run on the node: a node whose other settings are out of date is replaced.
func BuildNodeConfigMap(vc *v1.ValkeyCluster, vn *v1.ValkeyNode, conf string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: nodeObjectMeta(vc, vn, v1.NodeConfigMapName(vn.Name)), Data: map[string]string{ConfigFileName: conf}}
}

// NewPodName returns {cluster}-{5 random hex}, the name of a new ValkeyNode and its pod.
func NewPodName(vc *v1.ValkeyCluster) string {
	buf := make([]byte, 3)
	_, _ = rand.Read(buf)
	return vc.Name + "-" + hex.EncodeToString(buf)[:5]
}

func quantity(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}
