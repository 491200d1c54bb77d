package v1alpha1

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// What spec.podAnnotations may not carry (SPEC §2.10), checked by the CRD's rules on the field
// and, in Go, by CheckPodAnnotations, whose messages are the CRD's word for word (the admission
// tests compare them). Change both together.

// Sizes of pod annotations.
const (
	// PodAnnotationsSizeLimit is what Kubernetes lets a pod carry in annotations: 256 KiB, the
	// keys and values of all of them together, in bytes. A pod over it is refused at creation,
	// and a patch that takes it over is refused too.
	PodAnnotationsSizeLimit = 256 << 10

	// MaxPodAnnotationsBytes bounds spec.podAnnotations (keys and values together, in bytes): half
	// of PodAnnotationsSizeLimit. The rest is headroom for what else lands on the same pod: the
	// operator's own annotations (AnnotationSpecHash, AnnotationReplicationUser, under 100
	// bytes), those that admission webhooks and other controllers add (a sidecar injector's
	// status, a CNI's network status), and keys removed from the spec, which stay on the live
	// pods until they are replaced. It also keeps a ValkeyCluster applied with client-side
	// `kubectl apply`, which copies the whole object into an annotation of the ValkeyCluster,
	// under that object's own 256 KiB.
	MaxPodAnnotationsBytes = 128 << 10
)

// Annotation keys that set the confinement of a pod's containers. The operator confines its pods
// itself (seccomp RuntimeDefault in the pod's securityContext; the container runtime's default
// AppArmor profile); these annotations would override or loosen that (`unconfined`), or, for
// seccomp, contradict the securityContext and have the pod refused.
const (
	// AppArmorAnnotationPrefix is the beta AppArmor annotation, one key per container
	// (container.apparmor.security.beta.kubernetes.io/valkey: unconfined). Since Kubernetes 1.30
	// the API server copies it into the container's securityContext.appArmorProfile.
	AppArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
	// SeccompPodAnnotationPrefix starts the alpha seccomp annotation of the whole pod,
	// seccomp.security.alpha.kubernetes.io/pod; the prefix is refused whole.
	SeccompPodAnnotationPrefix = "seccomp.security.alpha.kubernetes.io/"
	// SeccompContainerAnnotationPrefix is the alpha seccomp annotation, one key per container.
	SeccompContainerAnnotationPrefix = "container.seccomp.security.alpha.kubernetes.io/"
)

// podAnnotationsSizeMessage is the CRD's message for podAnnotations over MaxPodAnnotationsBytes.
const podAnnotationsSizeMessage = "podAnnotations may hold at most 131072 bytes, keys and values together: Kubernetes refuses a pod whose annotations exceed 262144 bytes, and the rest is kept for the operator's own annotations and those that other controllers add; keep large data in a ConfigMap and annotate its name"

// annotationKey is the form of an annotation key (the CRD's rule uses the same expression): an
// optional DNS prefix and '/', then a name of at most 63 characters.
var annotationKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// maxAnnotationKeyPrefix is Kubernetes' bound on the prefix of an annotation key (a DNS subdomain).
const maxAnnotationKeyPrefix = 253

// CheckPodAnnotations returns why spec.podAnnotations cannot be put on the cluster's pods, or
// nil: the CRD's rules on the field, in Go, with the same messages (not the count of 64
// entries, a schema bound the CRD has had from its first version). Keys are checked in sorted
// order and the first problem is returned. The operator can run it before it builds or patches
// a pod, so that a ValkeyCluster stored before a rule existed (or written around admission)
// is refused with the reason instead of carrying an annotation that loosens the pod's
// confinement, or failing every pod creation on the size limit.
func CheckPodAnnotations(annotations map[string]string) error {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		switch {
		case IsReservedKey(k):
			return fmt.Errorf("podAnnotations key %s uses the prefix %s, which is reserved for the operator; choose another prefix", k, KeyPrefix)
		case !annotationKey.MatchString(k):
			return fmt.Errorf("podAnnotations keys must be annotation keys: an optional DNS prefix and '/', then a name of at most 63 letters, digits, '-', '.' and '_', like example.com/scrape; not %s", k)
		case strings.IndexByte(k, '/') > maxAnnotationKeyPrefix:
			return fmt.Errorf("podAnnotations key prefixes (before the '/') must be at most 253 characters, as Kubernetes requires: no pod could carry the key; not %s", k)
		case strings.HasPrefix(k, AppArmorAnnotationPrefix):
			return fmt.Errorf("podAnnotations key %s would set the AppArmor profile of the cluster's containers, which the operator leaves at the container runtime's default; an annotation may not loosen it: remove the key", k)
		case strings.HasPrefix(k, SeccompPodAnnotationPrefix) || strings.HasPrefix(k, SeccompContainerAnnotationPrefix):
			return fmt.Errorf("podAnnotations key %s would set the seccomp profile of the cluster's pods, which the operator sets itself (RuntimeDefault); an annotation may not override it: remove the key", k)
		}
		total += len(k) + len(annotations[k])
	}
	if total > MaxPodAnnotationsBytes {
		// The CRD's message cannot say how many (the API server's cost estimate of a message
		// that prints a number has no bound), and this one is the CRD's.
		return errors.New(podAnnotationsSizeMessage)
	}
	return nil
}
