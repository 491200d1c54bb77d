package controllers

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/version"
)

// Ports and paths inside a Valkey pod.
const (
	ClientPort = 6379
	BusPort    = 16379

	configMountPath = "/etc/valkey"
	secretMountPath = "/etc/valkey-secret"
	dataMountPath   = "/data"

	configFileName = "valkey.conf"
	aclFileName    = "users.acl"
	authFileName   = "auth.conf"

	// operatorPasswordKey is the key of the operator's password in its credential Secret.
	operatorPasswordKey = "password"
	// replPasswordKey is the key of the replication user's password in the same Secret.
	replPasswordKey = "repl-password"
	// migratePasswordKey is the key of the migration user's password in the same Secret.
	migratePasswordKey = "migrate-password"

	// valkeyUID runs valkey-server (the uid of the valkey user in the official images).
	valkeyUID = 999

	// clusterNodeTimeoutMS is cluster-node-timeout: how long a node may be silent before it is
	// flagged failed, so also how soon Valkey fails over on its own.
	clusterNodeTimeoutMS = 5000
)

// Names of the objects the operator creates for a cluster (the documented ones are in
// apis/v1alpha1/names.go).
func secretName(vc *v1.ValkeyCluster) string     { return vc.Name + "-acl" }
func credentialName(vc *v1.ValkeyCluster) string { return v1.OperatorAuthSecretName(vc.Name) }
func serviceName(vc *v1.ValkeyCluster) string    { return vc.Name }

// clusterLabels are on every object the operator creates for vc.
func clusterLabels(vc *v1.ValkeyCluster) map[string]string {
	return map[string]string{
		v1.LabelCluster:                vc.Name,
		"app.kubernetes.io/name":       "valkey",
		"app.kubernetes.io/instance":   vc.Name,
		"app.kubernetes.io/managed-by": "valkey-operator",
	}
}

func ownerRef(vc *v1.ValkeyCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(vc, v1.GroupVersion.WithKind("ValkeyCluster"))
}

func objectMeta(vc *v1.ValkeyCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       vc.Namespace,
		Labels:          clusterLabels(vc),
		OwnerReferences: []metav1.OwnerReference{ownerRef(vc)},
	}
}

// buildService returns the headless Service that gives every pod a DNS name
// {pod}.{cluster}.{namespace}.svc.cluster.local, ready or not.
func buildService(vc *v1.ValkeyCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(vc, serviceName(vc)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{v1.LabelCluster: vc.Name},
			Ports: []corev1.ServicePort{
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort)},
				{Name: "bus", Port: BusPort, TargetPort: intstr.FromInt32(BusPort)},
			},
		},
	}
}

// renderValkeyConf renders valkey.conf: the operator's own directives, then the merged
// ValkeyConfig directives sorted by name. Neither logfile nor loglevel is set unless the
// ValkeyConfig does, so node logs go to stdout. Secrets are not here: they are in the
// included auth.conf of the cluster's Secret. announce is the node's DNS name in a TLS
// cluster, which it announces (cluster-announce-hostname) and its certificate covers; "" for a
// cluster without TLS. It is the one per-node line, so it is not among the node's recorded
// settings (valkeySettings), which must be the same on every node built from one spec.
func renderValkeyConf(rc *ResolvedConfig, announce string) string {
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

// valkeySettings are the directives of renderValkeyConf as a map, for a ValkeyNode's spec.
func valkeySettings(rc *ResolvedConfig, withTLS bool) map[string]string {
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
		{"cluster-node-timeout", strconv.Itoa(clusterNodeTimeoutMS)},
		{"cluster-port", strconv.Itoa(BusPort)},
		{"aclfile", secretMountPath + "/" + aclFileName},
		{"include", secretMountPath + "/" + authFileName},
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

// buildNodeConfigMap holds the node's rendered valkey.conf, owned by its ValkeyNode. It is
// created with the node; only its live settings are rewritten afterwards (liveConf), once they
// run on the node: a node whose other settings are out of date is replaced.
func buildNodeConfigMap(vc *v1.ValkeyCluster, vn *v1.ValkeyNode, conf string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: nodeObjectMeta(vc, vn, v1.NodeConfigMapName(vn.Name)), Data: map[string]string{configFileName: conf}}
}

// buildValkeyNode returns the record of a new node of shard, named name, in lifecycle Joining.
// joinType is the valkey.gomomento.com/join-type label ("" for a founding member).
func buildValkeyNode(vc *v1.ValkeyCluster, rc *ResolvedConfig, name string, shard int, joinType v1.JoinType) *v1.ValkeyNode {
	meta := objectMeta(vc, name)
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
			ValkeySettings: valkeySettings(rc, vc.Spec.TLS != nil),
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

// buildSecret holds the ACL file and auth.conf: masteruser / masterauth, with which replicas
// authenticate to their primary as the replication user (and the liveness probe PINGs).
func buildSecret(vc *v1.ValkeyCluster, aclFile, replPassword string) *corev1.Secret {
	auth := fmt.Sprintf("masteruser %s\nmasterauth %s\n", acl.ReplicationUser, replPassword)
	return &corev1.Secret{
		ObjectMeta: objectMeta(vc, secretName(vc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{aclFileName: []byte(aclFile), authFileName: []byte(auth)},
	}
}

// buildCredentialSecret holds the system users' passwords for the cluster, generated once.
func buildCredentialSecret(vc *v1.ValkeyCluster) (*corev1.Secret, error) {
	op, err := newPassword()
	if err != nil {
		return nil, err
	}
	repl, err := newPassword()
	if err != nil {
		return nil, err
	}
	migrate, err := newPassword()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: objectMeta(vc, credentialName(vc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{operatorPasswordKey: []byte(op), replPasswordKey: []byte(repl), migratePasswordKey: []byte(migrate)},
	}, nil
}

// newPassword is 32 random bytes in hex.
func newPassword() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// nodeSpecHash hashes what a node is built from, its ValkeyNode's spec, reduced to what the
// change-impact table (concepts/reconciliation.md) says requires replacing it: the image,
// resources, every valkey setting, placement.zones compared as a set, placement.nodeSelector
// and the name of the TLS Secret (a pod's volumes cannot change, so a node mounting another
// Secret than tls.secretRef names is replaced; the Secret's content is reloaded in place).
// Nothing else: not the config chain's names, not key order, not zoneSpread (future pods only),
// and not the operator's shutdownFailover default, which only makes a node leave more gracefully:
// an operator upgrade that adds it must not roll every pod. Nor the settings Valkey takes at run
// time (liveconf): the settings planner applies those with CONFIG SET, so a change of them alone
// replaces no pod. Both sides of the comparison drop them, so the operator upgrade that
// introduced this rolls nothing either. The same function hashes a live node's recorded spec and the spec a node created now
// would get, so "outdated" is exactly "built from something else".
func nodeSpecHash(spec *v1.ValkeyNodeSpec) string {
	settings := liveconf.WithoutLive(spec.ValkeySettings)
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
	}{spec.Image, canonicalQuantity(spec.CPU), canonicalQuantity(spec.Memory), settings, zones, selector})
	if spec.TLSSecret != "" {
		// Appended only when set, so that the hash of a node without TLS is what it always was.
		data = append(data, "\x00tls="+spec.TLSSecret...)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// startSpecHash is nodeSpecHash with the live settings too (their values as written): what a
// node starts from. It only tells whether a pod that failed on
// start failed on the current spec (fsm.Pod.StartHash); it never outdates a running node.
func startSpecHash(spec *v1.ValkeyNodeSpec) string {
	live := liveconf.Live(spec.ValkeySettings)
	var b strings.Builder
	b.WriteString(nodeSpecHash(spec))
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

func quantity(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

// newPodName returns {cluster}-{5 random hex}, the name of a new ValkeyNode and its pod.
func newPodName(vc *v1.ValkeyCluster) string {
	buf := make([]byte, 3)
	_, _ = rand.Read(buf)
	return vc.Name + "-" + hex.EncodeToString(buf)[:5]
}

// buildPod returns the pod of the ValkeyNode vn: same name, owned by vn, running its own
// {node}-config ConfigMap. The pod is never restarted (restartPolicy Never): a failed node is
// replaced by a new ValkeyNode with a new name.
func buildPod(vc *v1.ValkeyCluster, rc *ResolvedConfig, vn *v1.ValkeyNode, hash string, defaultSpread v1.ZoneSpread) *corev1.Pod {
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
			Subdomain:                     serviceName(vc),
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
				Name:    "valkey",
				Image:   rc.Image.Image(),
				Command: []string{"valkey-server", configMountPath + "/" + configFileName},
				Ports: []corev1.ContainerPort{
					{Name: "valkey", ContainerPort: ClientPort},
					{Name: "valkey-bus", ContainerPort: BusPort},
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
					SecretName: secretName(vc), DefaultMode: ptr.To[int32](0o440)}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			// As the original's pods (concepts/pod-management.md): Valkey runs on arm64 as on
			// amd64, so tainted arm64 pools are open to it; placement.nodeSelector and
			// placement.zones steer pods away where that is not wanted.
			Tolerations: []corev1.Toleration{arm64Toleration},
		},
	}
	if vn.Spec.TLSSecret != "" {
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: tlsMountPath, ReadOnly: true})
		// Mounted whole, not by subPath: a subPath mount never sees the Secret's updates, and
		// certificate rotation is an update of the Secret in place.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: vn.Spec.TLSSecret, DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: tlsmaterial.CertKey, Path: tlsmaterial.CertKey}, {Key: tlsmaterial.KeyKey, Path: tlsmaterial.KeyKey}, {Key: tlsmaterial.CAKey, Path: tlsmaterial.CAKey}}}}})
	}
	applyPlacement(pod, vc, shard, defaultSpread)
	return pod
}

// arm64Toleration is the toleration every Valkey pod carries, for the taint platforms put on
// arm64 node pools.
var arm64Toleration = corev1.Toleration{
	Key: corev1.LabelArchStable, Operator: corev1.TolerationOpEqual, Value: "arm64", Effect: corev1.TaintEffectNoSchedule,
}

// applyPlacement sets the zone affinity, the nodeSelector and the spread constraints: per shard
// across zones (hard or soft by zoneSpread) and across hosts (always soft); in required mode
// also a soft cluster-wide zone spread (Kubernetes allows one hard zone constraint per pod).
func applyPlacement(pod *corev1.Pod, vc *v1.ValkeyCluster, shard int, defaultSpread v1.ZoneSpread) {
	spread := spreadMode(vc, defaultSpread)
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

// spreadMode is the cluster's zoneSpread, else the operator's default.
func spreadMode(vc *v1.ValkeyCluster, defaultSpread v1.ZoneSpread) v1.ZoneSpread {
	if p := vc.Spec.Placement; p != nil && p.ZoneSpread != "" {
		return p.ZoneSpread
	}
	return defaultSpread
}

// placeInZones adds what the planner asked of a new pod's zone (plan.CreatePod): pinned to zone
// when set (a copy moved to spread the cluster: required in every mode, the move is only worth
// it there); else kept out of the zones in avoid, those of its shard's live copies, as a
// requirement under zoneSpread required (the scheduler's per-shard spread still counts a copy
// lost with its Kubernetes node, and would let a replacement join a surviving copy's zone) and
// as a strong preference otherwise. The pod's spec hash does not change: where a pod runs is
// not what it is built from.
func placeInZones(pod *corev1.Pod, vc *v1.ValkeyCluster, defaultSpread v1.ZoneSpread, zone, avoid string) {
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
	if zone == "" && spreadMode(vc, defaultSpread) != v1.ZoneSpreadRequired {
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
