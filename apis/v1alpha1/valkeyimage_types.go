package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValkeyImageSpec is one approved container image of Valkey.
type ValkeyImageSpec struct {
	// repository is the image repository, without tag or digest, such as valkey/valkey or
	// registry.example.com:5000/valkey/valkey. It must be one a container runtime can pull:
	// the pods run repository:tag verbatim.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule=`self.matches('^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')`,message="repository must be an image repository a container runtime can pull, without tag or digest, like valkey/valkey or registry.example.com:5000/valkey/valkey: pods run repository:tag, so put the tag (and any digest, like 9.0.0@sha256:…) in spec.tag"
	Repository string `json:"repository"`

	// tag is the image tag, such as 9.0.0; a digest pins it: 9.0.0@sha256:<64 hex>, or the
	// digest alone, sha256:<64 hex> (the pods then run repository@sha256:…).
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches('^([a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,})?|@?[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,})$')`,message="tag must be an image tag a container runtime can pull, like 9.0.0 (letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-'), optionally pinned by a digest, like 9.0.0@sha256:<64 hex>, or a digest alone, like sha256:<64 hex>"
	Tag string `json:"tag"`

	// version is the Valkey version the image provides, such as 9.0.0, shown in kubectl get.
	// The operator reads only its major number, to use Valkey 9 features (shutdown-on-sigterm
	// failover, atomic ACL LOAD) when it is 9 or more; anything else it treats as older.
	Version string `json:"version"`
}

// Image returns the image reference that pods run: repository:tag, or repository@digest when
// the tag is a digest alone.
func (s ValkeyImageSpec) Image() string {
	switch {
	case strings.HasPrefix(s.Tag, "@"):
		return s.Repository + s.Tag
	case strings.Contains(s.Tag, ":") && !strings.Contains(s.Tag, "@"):
		return s.Repository + "@" + s.Tag
	}
	return s.Repository + ":" + s.Tag
}

// ValkeyImageStatus is empty: the original API has a status subresource for ValkeyImage and
// defines no field in it.
type ValkeyImageStatus struct{}

// ValkeyImage is one approved Valkey container image: the allowlist. A ValkeyConfig names one
// in spec.imageRef; a cluster whose config resolves to no ValkeyImage is Invalid.
// Cluster-scoped.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vkimg,categories=valkey
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.repository`
// +kubebuilder:printcolumn:name="Tag",type=string,JSONPath=`.spec.tag`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValkeyImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the image: repository, tag and the Valkey version inside.
	Spec ValkeyImageSpec `json:"spec"`
	// status is empty.
	Status ValkeyImageStatus `json:"status,omitempty"`
}

// ValkeyImageList is a list of ValkeyImage.
// +kubebuilder:object:root=true
type ValkeyImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ValkeyImages.
	Items []ValkeyImage `json:"items"`
}
