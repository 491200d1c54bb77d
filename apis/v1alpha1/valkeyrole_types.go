package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValkeyRoleSpec is a reusable set of command permissions. It holds no key pattern, channel
// or password: those are given where a role is bound (ACLPermission).
type ValkeyRoleSpec struct {
	// categories allow or deny Valkey ACL categories, such as read, write or dangerous. At
	// most 64 entries.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Categories []CategoryRule `json:"categories,omitempty"`

	// commands allow or deny single commands, such as flushall, or one subcommand, such as
	// cluster|info. At most 256 entries.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Commands []CommandRule `json:"commands,omitempty"`
}

// CategoryRule allows or denies the commands of one Valkey ACL category (+@name / -@name).
type CategoryRule struct {
	// name is the category without the '@', such as read, write, admin or dangerous, or one a
	// module adds (json, bloom, search). As in the original, any name of a letter then letters,
	// digits, '-' and '_' is admitted; a name a node of a cluster using the role does not know
	// (ACL CAT) makes that cluster Invalid, naming it and the node, before any node is given it.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')",message="category name must be a Valkey ACL category without the @, like read or dangerous"
	Name string `json:"name"`

	// access is allow or deny.
	Access RuleAccess `json:"access"`
}

// CommandRule allows or denies one Valkey command (+name / -name), or one of its subcommands
// (+name|subcommand).
type CommandRule struct {
	// name is the command, such as get, flushall or cluster. A command (or subcommand) a node
	// of a cluster using the role does not know (COMMAND LIST) makes that cluster Invalid,
	// naming it and the node.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')",message="command name must be a single Valkey command like get or flushall; for cluster|info write name: cluster and subcommand: info"
	Name string `json:"name"`

	// subcommand narrows the rule to one subcommand, such as info for cluster|info.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')",message="subcommand must be a single word like info (for cluster|info)"
	Subcommand string `json:"subcommand,omitempty"`

	// access is allow or deny.
	Access RuleAccess `json:"access"`
}

// RuleAccess says whether a role rule grants (+) or revokes (-) what it names.
// +kubebuilder:validation:Enum=allow;deny
type RuleAccess string

// The two kinds of role rule.
const (
	// RuleAllow grants the category or command.
	RuleAllow RuleAccess = "allow"
	// RuleDeny revokes the category or command.
	RuleDeny RuleAccess = "deny"
)

// ValkeyRoleStatus is empty: the original API has a status subresource for ValkeyRole and
// defines no field in it.
type ValkeyRoleStatus struct{}

// ValkeyRole is a named, reusable set of command permissions that ACL bindings refer to in
// permissions[].roleRef. Cluster-scoped.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vkrole,categories=valkey
type ValkeyRole struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the allowed and denied categories and commands.
	Spec ValkeyRoleSpec `json:"spec"`
	// status is empty.
	Status ValkeyRoleStatus `json:"status,omitempty"`
}

// ValkeyRoleList is a list of ValkeyRole.
// +kubebuilder:object:root=true
type ValkeyRoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ValkeyRoles.
	Items []ValkeyRole `json:"items"`
}
