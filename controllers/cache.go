package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
)

// CacheOptions keeps the manager's caches to what is the operator's: of the core kinds it
// creates (pods, per-node ConfigMaps, the cluster's Secrets and Service, the shards'
// PodDisruptionBudgets, the cluster's NetworkPolicy), only the objects that carry the cluster label, which it puts on every
// one of them, without their managed fields. Without it the operator would cache every Secret,
// ConfigMap and Pod of the whole Kubernetes cluster: memory growing with other teams' objects,
// and every team's credentials in one heap. The label alone proves nothing (anyone who can write
// an object can set it): what is read is trusted only when a cluster controls it (see
// ownership.go), and Secrets and ConfigMaps, the kinds a team can fill by the megabyte, are not
// cached at all but read by name (ClientOptions) and watched by their metadata only (break test:
// 150 labelled ConfigMaps of 0.9 MB and 200 Secrets of 0.7 MB took the operator from 63 MB to
// 505 MB, its limit being 512 Mi).
//
// The label is a team's to set, so each kind also has a transform that keeps only what the
// operator reads of it (strip*, below): a labelled object costs the cache a few hundred bytes
// whatever it holds. 3 000 labelled objects with 64 KiB of annotations each grew the operator by
// 517 MB before them (the metadata watches keep annotations; pods, Services and budgets were kept
// whole; every labelled pod was listed on every pass), by 17 MB with them (make bench
// BENCH=LabelledObjects, docs/dev/benchmarks.md). A new read of a cached object must keep its
// field here (TestStripPodKeepsWhatIsRead checks the readers of pods).
func CacheOptions() cache.Options {
	ours, err := labels.NewRequirement(v1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	sel := labels.NewSelector().Add(*ours)
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: sel, Transform: stripPod},
		// Watched by their metadata only (WatchesMetadata): the transform sees
		// PartialObjectMetadata.
		&corev1.ConfigMap{}:             {Label: sel, Transform: stripMetadata},
		&corev1.Secret{}:                {Label: sel, Transform: stripMetadata},
		&corev1.Service{}:               {Label: sel, Transform: stripService},
		&policyv1.PodDisruptionBudget{}: {Label: sel, Transform: stripBudget},
		&networkingv1.NetworkPolicy{}:   {Label: sel, Transform: stripNetworkPolicy},
		// Every node of the Kubernetes cluster, but only what zones.go reads of it.
		&corev1.Node{}: {Transform: stripNode},
	}}
}

// keptMeta is what the operator reads of a cached object's metadata: its identity and version
// (SecretsByVersion compares resourceVersions), whether it is being deleted, its generation (the
// budgets' watch fires on a generation change), the cluster label (the pod index, clusterOf)
// and the shard label, and its controller reference (IsControlledBy, the owner handlers). Every
// other label, every annotation, every other owner reference and the finalizers are a team's to
// fill, and the operator never reads them from the cache.
func keptMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp}
	for _, k := range []string{v1.LabelCluster, v1.LabelShard} {
		if v, ok := m.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			out.OwnerReferences = []metav1.OwnerReference{ref}
			break
		}
	}
	return out
}

// stripMetadata is the transform of the metadata-only watches (ConfigMaps, Secrets).
func stripMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: keptMeta(&m.ObjectMeta)}, nil
}

// serviceKeptPorts and serviceKeptSelector bound what stripService keeps of a Service's spec:
// the cluster's own Service has two ports and a two-key selector.
const (
	serviceKeptPorts    = 4
	serviceKeptSelector = 4
	serviceKeptBytes    = 512
)

// stripService is the transform of Services: the operator reads whether the cluster controls
// the one of its name and whether its ports and selector are the original's
// (resources.ServiceBehind). Those are kept when they are as small as the operator's own; a
// larger spec (a team's labelled Service) is dropped, so it costs the cache a few hundred bytes.
// A Service the cluster controls whose spec was dropped reads as behind, is patched once to the
// operator's ports and selector, and is kept from then on.
func stripService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: keptMeta(&s.ObjectMeta)}
	if len(s.Spec.Ports) <= serviceKeptPorts && len(s.Spec.Selector) <= serviceKeptSelector {
		size := 0
		for k, v := range s.Spec.Selector {
			size += len(k) + len(v)
		}
		for _, p := range s.Spec.Ports {
			size += len(p.Name) + len(p.TargetPort.StrVal)
		}
		if size <= serviceKeptBytes {
			out.Spec.Selector = s.Spec.Selector
			for _, p := range s.Spec.Ports {
				out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort})
			}
		}
	}
	return out, nil
}

// stripBudget is the transform of PodDisruptionBudgets: their watch only enqueues the
// controlling cluster on a change of generation; the pass reads them from the API server.
func stripBudget(obj any) (any, error) {
	b, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return obj, nil
	}
	return &policyv1.PodDisruptionBudget{TypeMeta: b.TypeMeta, ObjectMeta: keptMeta(&b.ObjectMeta)}, nil
}

// stripPod is the transform of pods. A node's pod (nodePod) keeps what the ACL and TLS
// controllers and legacyReplication read of it: its metadata (keptMeta), the replication-user
// annotation, its creation time, images and TLS mount path, its phase and address and when its container started or whether it ended
// (fanout.Targets). Any other pod with the cluster label is nobody's node: it keeps its name and
// labels only, which no index and no handler acts on, so a team that labels thousands of pods
// costs the cache a few hundred bytes each and enqueues nothing.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: keptMeta(&p.ObjectMeta)}
	if !nodePod(p) {
		out.OwnerReferences = nil
		return out, nil
	}
	if v, ok := p.Annotations[v1.AnnotationReplicationUser]; ok {
		out.Annotations = map[string]string{v1.AnnotationReplicationUser: v}
	}
	// When it was created and the images it runs, which decide whether it is the pod the operator
	// created (identity.go: foreignReason), and the TLS Secret's mount, where the node reads its
	// certificate (resources.TLSFileParams), which an earlier operator version put elsewhere.
	out.CreationTimestamp = p.CreationTimestamp
	out.Spec.Containers = keptContainers(p.Spec.Containers)
	out.Spec.InitContainers = keptContainers(p.Spec.InitContainers)
	out.Status.Phase, out.Status.PodIP = p.Status.Phase, p.Status.PodIP
	for _, cs := range p.Status.ContainerStatuses {
		kept := corev1.ContainerStatus{Name: cs.Name}
		if r := cs.State.Running; r != nil {
			kept.State.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
		}
		if t := cs.State.Terminated; t != nil {
			kept.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
		}
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, kept)
	}
	return out, nil
}

// nodePod reports whether pod has the shape of a Valkey node's pod: controlled by a ValkeyNode
// of its own name (nodeOf). One pod per name can have it, and a reference to a ValkeyNode that
// does not exist is removed by the garbage collector with its pod, so there are at most as many
// as the namespace has ValkeyNodes, which only the operator creates.
func nodePod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "ValkeyNode" && ref.APIVersion == v1.GroupVersion.String() && ref.Name == pod.Name
}

// ClientOptions makes the manager's client read Secrets and ConfigMaps from the API server, never
// from a cache (see CacheOptions): a few reads by name per pass, and no informer holding them.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// IndexByCluster names the cache index of pods and ValkeyNodes by their cluster label
// (IndexCaches). A label selector on the cache scans every object of the namespace, so with every
// team's clusters in one namespace the ACL and TLS controllers' listing of one cluster's pods on
// each pass grew with the square of the fleet: 21 % of the operator's CPU samples at 500
// clusters of 1×0 in one namespace (the Fleet benchmark's profile). The index makes it a lookup.
const IndexByCluster = "metadata.labels.cluster"

// IndexCaches registers IndexByCluster on the manager's cache; called once, before it starts.
// Pods are indexed only when they have a node's shape (nodePod): a pod that merely carries the
// cluster label is never listed by the index, whatever their number.
func IndexCaches(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexByCluster, nodePodCluster); err != nil {
		return fmt.Errorf("index pods by cluster: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1.ValkeyNode{}, IndexByCluster, clusterLabel); err != nil {
		return fmt.Errorf("index ValkeyNodes by cluster: %w", err)
	}
	return nil
}

// clusterLabel is the index value of an object: its cluster label, when it has one.
func clusterLabel(o client.Object) []string {
	if name, ok := o.GetLabels()[v1.LabelCluster]; ok {
		return []string{name}
	}
	return nil
}

// nodePodCluster is the index value of a pod: its cluster label, when it is a node's pod.
func nodePodCluster(o client.Object) []string {
	if p, ok := o.(*corev1.Pod); !ok || !nodePod(p) {
		return nil
	}
	return clusterLabel(o)
}

// stripNetworkPolicy keeps of a labelled NetworkPolicy what network.go reads: its identity, and
// of a cluster's own policy ({cluster}-network, controlled by a ValkeyCluster) the labels the
// operator sets and the spec it compares with the built one. Any other policy a team labels keeps
// its identity only, so a namespace of labelled policies costs the cache no more than their names.
func stripNetworkPolicy(obj any) (any, error) {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return obj, nil
	}
	out := &networkingv1.NetworkPolicy{TypeMeta: np.TypeMeta, ObjectMeta: keptMeta(&np.ObjectMeta)}
	owner := metav1.GetControllerOf(np)
	if owner == nil || owner.Kind != "ValkeyCluster" || np.Name != v1.NetworkPolicyName(owner.Name) {
		return out, nil
	}
	for _, k := range []string{resources.LabelName, resources.LabelInstance, resources.LabelManagedBy} {
		if v, ok := np.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	out.Spec = np.Spec
	return out, nil
}

// keptContainers keeps of each container its name, its image and its TLS mount (stripPod).
func keptContainers(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		kept := corev1.Container{Name: c.Name, Image: c.Image}
		for _, m := range c.VolumeMounts {
			if m.Name == resources.TLSVolume {
				kept.VolumeMounts = []corev1.VolumeMount{{Name: m.Name, MountPath: m.MountPath}}
			}
		}
		out = append(out, kept)
	}
	return out
}
