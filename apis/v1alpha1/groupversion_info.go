// Package v1alpha1 holds the API of the valkey-operator, group valkey.gomomento.com, version
// v1alpha1: the five custom resources (ValkeyImage, ValkeyConfig, ValkeyRole, ValkeyCluster, and
// ValkeyNode, the operator's record of one node), the label and annotation keys the operator
// puts on what it creates, and small pure helpers over them.
//
// The API is that of the original (Rust) operator, field for field, so that manifests written
// for it apply unchanged. Every rule that can be checked on one object is in the CRD schema
// (OpenAPI and CEL, written here as kubebuilder markers and generated into manifests/crds by
// controller-gen), so that `kubectl apply` itself refuses a bad manifest with a message that
// says what to fix. Rules that need other objects (a missing reference, a config cycle, the
// contents of a TLS Secret) are the operator's, and end in state Invalid.
//
// The package imports no Kubernetes client and no Valkey client.
//
// +kubebuilder:object:generate=true
// +groupName=valkey.gomomento.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of every kind in this package.
const Group = "valkey.gomomento.com"

// Version is the API version of every kind in this package.
const Version = "v1alpha1"

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme, for a client or a
	// manager: `utilruntime.Must(v1alpha1.AddToScheme(scheme))`.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the GroupResource of a resource of this group, such as "valkeyclusters",
// for building API errors.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&ValkeyImage{}, &ValkeyImageList{},
		&ValkeyConfig{}, &ValkeyConfigList{},
		&ValkeyRole{}, &ValkeyRoleList{},
		&ValkeyCluster{}, &ValkeyClusterList{},
		&ValkeyNode{}, &ValkeyNodeList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
