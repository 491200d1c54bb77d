package resources

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/tlsmaterial"
)

// BuildPod returns the pod of the ValkeyNode vn: same name, owned by vn, running its own
// {node}-config ConfigMap. The pod is never restarted (restartPolicy Never): a failed node is
// replaced by a new ValkeyNode with a new name.
func BuildPod(vc *v1.ValkeyCluster, rc *ResolvedConfig, vn *v1.ValkeyNode, hash string, defaultSpread v1.ZoneSpread) *corev1.Pod {
	name, shard := vn.Name, int(vn.Spec.ShardIndex)
	meta := nodeObjectMeta(vc, vn, name)
	meta.Labels[v1.LabelShard] = strconv.Itoa(shard)
	meta.Annotations = map[string]string{}
	maps.Copy(meta.Annotations, vc.Spec.PodAnnotations)
	meta.Annotations[v1.AnnotationSpecHash] = hash
	// Says the node replicates as acl.ReplicationUser: a pod without it was started by an older
	// operator, whose replicas authenticate as acl.OperatorUser (see acl.SystemUsers).
	meta.Annotations[v1.AnnotationReplicationUser] = acl.ReplicationUser

	res := corev1.ResourceList{}
	if q := rc.Resources.CPU; q != nil {
		res[corev1.ResourceCPU] = *q
	}
	if q := rc.Resources.Memory; q != nil {
		res[corev1.ResourceMemory] = *q
	}
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			Hostname:                      name,
			Subdomain:                     ServiceName(vc),
			EnableServiceLinks:            ptr.To(false),
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](valkeyUID),
				RunAsGroup:     ptr.To[int64](valkeyUID),
				FSGroup:        ptr.To[int64](valkeyUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    ValkeyContainer,
				Image:   rc.Image.Image(),
				Command: []string{"valkey-server", configMountPath + "/" + ConfigFileName},
				Ports: []corev1.ContainerPort{
					{Name: ClientPortName, ContainerPort: ClientPort},
					{Name: BusPortName, ContainerPort: BusPort},
				},
				LivenessProbe: livenessProbe(vc),
				Lifecycle:     preStop(vc, rc.Image),
				Resources:     corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: configMountPath, ReadOnly: true},
					{Name: "secret", MountPath: secretMountPath, ReadOnly: true},
					{Name: "data", MountPath: dataMountPath},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: v1.NodeConfigMapName(name)}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: ACLSecretName(vc), DefaultMode: ptr.To[int32](0o440)}}},
				{Name: DataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: DataVolumeLimit(&vn.Spec)}}},
			},
			// As the original's pods (concepts/pod-management.md): Valkey runs on arm64 as on
			// amd64, so tainted arm64 pools are open to it; placement.nodeSelector and
			// placement.zones steer pods away where that is not wanted.
			Tolerations: []corev1.Toleration{Arm64Toleration},
		},
	}
	if vn.Spec.TLSSecret != "" {
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: TLSVolume, MountPath: TLSMountPath, ReadOnly: true})
		// Mounted whole, not by subPath: a subPath mount never sees the Secret's updates, and
		// certificate rotation is an update of the Secret in place.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: TLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: vn.Spec.TLSSecret, DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: tlsmaterial.CertKey, Path: tlsmaterial.CertKey}, {Key: tlsmaterial.KeyKey, Path: tlsmaterial.KeyKey}, {Key: tlsmaterial.CAKey, Path: tlsmaterial.CAKey}}}}})
	}
	applyPlacement(pod, vc, shard, defaultSpread)
	return pod
}

// Arm64Toleration is the toleration every Valkey pod carries, for the taint platforms put on
// arm64 node pools.
var Arm64Toleration = corev1.Toleration{
	Key: corev1.LabelArchStable, Operator: corev1.TolerationOpEqual, Value: "arm64", Effect: corev1.TaintEffectNoSchedule,
}

// applyPlacement sets the zone affinity, the nodeSelector and the spread constraints: per shard
// across zones (hard or soft by zoneSpread) and across hosts (always soft); in required mode
// also a soft cluster-wide zone spread (Kubernetes allows one hard zone constraint per pod).
func applyPlacement(pod *corev1.Pod, vc *v1.ValkeyCluster, shard int, defaultSpread v1.ZoneSpread) {
	spread := SpreadMode(vc, defaultSpread)
	if p := vc.Spec.Placement; p != nil {
		if len(p.Zones) > 0 {
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(p.Zones)}},
				}}},
			}}
		}
		if len(p.NodeSelector) > 0 {
			pod.Spec.NodeSelector = maps.Clone(p.NodeSelector)
		}
	}
	shardSel := &metav1.LabelSelector{MatchLabels: map[string]string{v1.LabelCluster: vc.Name, v1.LabelShard: strconv.Itoa(shard)}}
	when := corev1.ScheduleAnyway
	if spread == v1.ZoneSpreadRequired {
		when = corev1.DoNotSchedule
	}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: when, LabelSelector: shardSel},
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: shardSel},
	}
	clusterSel := &metav1.LabelSelector{MatchLabels: map[string]string{v1.LabelCluster: vc.Name}}
	if spread == v1.ZoneSpreadRequired {
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: clusterSel,
		})
	} else {
		// The cluster-wide zone preference of bestEffort: Kubernetes refuses a second spread
		// constraint on one key with the same whenUnsatisfiable, so it is a preferred
		// anti-affinity to the cluster's pods by zone, which scores a zone lower for each one
		// it holds (a fresh 3x1 on three zones had put its six pods in two).
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &corev1.Affinity{}
		}
		pod.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: clusterSel},
		}}}
	}
}

// SpreadMode is the cluster's zoneSpread, else the operator's default.
func SpreadMode(vc *v1.ValkeyCluster, defaultSpread v1.ZoneSpread) v1.ZoneSpread {
	if p := vc.Spec.Placement; p != nil && p.ZoneSpread != "" {
		return p.ZoneSpread
	}
	return defaultSpread
}

// PlaceInZones adds what the planner asked of a new pod's zone (plan.CreatePod): pinned to zone
// when set (a copy moved to spread the cluster: required in every mode, the move is only worth
// it there); else kept out of the zones in avoid, those of its shard's live copies, as a
// requirement under zoneSpread required (the scheduler's per-shard spread still counts a copy
// lost with its Kubernetes node, and would let a replacement join a surviving copy's zone) and
// as a strong preference otherwise. The pod's spec hash does not change: where a pod runs is
// not what it is built from.
func PlaceInZones(pod *corev1.Pod, vc *v1.ValkeyCluster, defaultSpread v1.ZoneSpread, zone, avoid string) {
	var req *corev1.NodeSelectorRequirement
	switch {
	case zone != "":
		req = &corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	case avoid != "":
		req = &corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpNotIn, Values: strings.Split(avoid, ",")}
	default:
		return
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if zone == "" && SpreadMode(vc, defaultSpread) != v1.ZoneSpreadRequired {
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{*req}}})
		return
	}
	// Terms are ORed, expressions within a term ANDed: the requirement joins every term
	// (placement.zones' one), or is the only one.
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, *req)
	}
}

// dataSlack is what the data directory holds besides copies of the dataset: nodes.conf (a few
// hundred bytes a node) and room for the copies to be a little larger than the memory they came
// from.
const dataSlack = 64 << 20

// DataSizeLimit is the sizeLimit of a node's data emptyDir (/data, Valkey's dir), from what the
// node was built with (its ValkeyNode's spec): a bound on the node disk a node may fill, which a
// team could otherwise fill without end (SAVE in a loop through an open default user, AOF on) on a
// Kubernetes node other teams share; past it the kubelet evicts the pod, and the operator replaces
// it like any lost node.
//
// What Valkey writes there is nodes.conf and copies of the dataset, each at most about the
// memory the dataset lives in: the container's memory limit, else maxmemory. Without persistence
// two such copies: a replica's full sync writes the new RDB beside the one its last sync left
// (rdb-del-sync-files is no), then renames it over. save adds a BGSAVE's temporary RDB beside
// dump.rdb; appendonly yes adds the AOF's base and its increments (rewritten when they have grown
// as large as the base, so two copies), with a rewrite's new base on top: 2, 3 or 5 copies, plus
// dataSlack. Generous on purpose: a limit a sync can reach would evict a replica in the middle of
// every sync, for ever. nil (no limit) when neither memory nor maxmemory bounds the dataset.
//
// The limit is derived from the record, not added to it: the spec hash (NodeSpecHash) is of the
// ValkeyNode's spec, so adding the limit outdated no running node at the operator upgrade that
// introduced it: the pods that run keep their volume as it is (a pod's volumes cannot change),
// and each node created from then on gets the limit.
func DataSizeLimit(spec *v1.ValkeyNodeSpec) *resource.Quantity {
	var dataset int64
	if q, err := resource.ParseQuantity(spec.Memory); err == nil && q.Sign() > 0 {
		dataset = q.Value()
	} else if n, err := strconv.ParseInt(liveconf.Normalize("maxmemory", spec.ValkeySettings["maxmemory"]), 10, 64); err == nil && n > 0 {
		dataset = n
	}
	if dataset <= 0 {
		return nil
	}
	copies := int64(2)
	if liveconf.Unquote(spec.ValkeySettings["save"]) != "" {
		copies++
	}
	if strings.EqualFold(liveconf.Unquote(spec.ValkeySettings["appendonly"]), "yes") {
		copies += 3
	}
	if dataset > (math.MaxInt64-dataSlack)/copies {
		return nil // beyond any disk: no bound worth writing
	}
	return resource.NewQuantity(copies*dataset+dataSlack, resource.BinarySI)
}

// GrowthRoom is how many times its memory a node may grow in place (an in-place resize,
// plan/resize.go) while its data volume still bounds what it writes: a pod's volumes cannot
// change, so the volume is sized at creation for a node of GrowthRoom times the memory. A grow
// past it replaces the node, as any change that a running pod cannot take.
const GrowthRoom = 2

// DataVolumeLimit is the sizeLimit given to the data emptyDir of a pod created now for spec:
// DataSizeLimit of the node grown GrowthRoom times (its memory or, without one, its maxmemory).
func DataVolumeLimit(spec *v1.ValkeyNodeSpec) *resource.Quantity {
	grown := *spec
	if q, err := resource.ParseQuantity(spec.Memory); err == nil && q.Sign() > 0 && q.Value() <= math.MaxInt64/GrowthRoom {
		grown.Memory = resource.NewQuantity(GrowthRoom*q.Value(), resource.BinarySI).String()
	} else if n, err := strconv.ParseInt(liveconf.Normalize("maxmemory", spec.ValkeySettings["maxmemory"]), 10, 64); err == nil && n > 0 && n <= math.MaxInt64/GrowthRoom {
		grown.ValkeySettings = maps.Clone(spec.ValkeySettings)
		grown.ValkeySettings["maxmemory"] = strconv.FormatInt(GrowthRoom*n, 10)
	}
	return DataSizeLimit(&grown)
}

// ValkeyContainer is the name of a node pod's one container, and DataVolume of its data emptyDir
// (Valkey's dir).
const (
	ValkeyContainer = "valkey"
	DataVolume      = "data"
)
