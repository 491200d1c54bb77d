package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValkeyImageSpec is one approved container image of Valkey.
type ValkeyImageSpec struct {
	// repository is the image repository, without tag or digest, such as valkey/valkey or
	// registry.example.com:5000/valkey/valkey.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule=`self.matches('^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')`,message="repository must be an image repository without tag or digest, like valkey/valkey or registry.example.com:5000/valkey/valkey; put the tag in spec.tag"
	Repository string `json:"repository"`

	// tag is the image tag, such as 9.0.0.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')",message="tag must be an image tag like 9.0.0: letters, digits, '_', '.' and '-', not starting with '.' or '-'"
	Tag string `json:"tag"`

	// version is the semantic version (MAJOR.MINOR.PATCH) of the Valkey inside the image,
	// such as 9.0.0. It is meant to tell the operator what the nodes support; no feature of
	// this release depends on it yet.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?$')`,message="version must be the semantic version of the Valkey in the image, MAJOR.MINOR.PATCH like 9.0.0"
	Version string `json:"version"`
}

// Image returns the image reference repository:tag that pods run.
func (s ValkeyImageSpec) Image() string {
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
