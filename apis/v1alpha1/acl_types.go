package v1alpha1

// ACLBinding binds one Valkey user to its passwords and permissions. It appears in
// ValkeyCluster spec.acl and in ValkeyConfig spec.acl. No field takes a plaintext password.
type ACLBinding struct {
	// username is the Valkey user this binding creates: letters, digits, '-' and '_'. The
	// prefix _momento_ is reserved for the operator's own users.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9_-]+$')",message="username must be non-empty and contain only letters, digits, '-' and '_'"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('_momento_')",message="usernames starting with _momento_ are reserved for the operator's own users; choose another username"
	Username string `json:"username"`

	// passwordHashes are SHA-256 digests of the user's passwords, each 64 lowercase hex
	// characters (`echo -n "$PASSWORD" | sha256sum`), without Valkey's '#' prefix. Every
	// listed password works, which makes rotation possible: add the new hash, move the
	// clients, remove the old one. 1 to 8 entries.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="passwordHashes entries must be SHA-256 hex digests: exactly 64 lowercase hex characters, as printed by `echo -n \"$PASSWORD\" | sha256sum`, never the password itself"
	PasswordHashes []string `json:"passwordHashes"`

	// permissions grant the user commands (from a ValkeyRole) on key and channel patterns.
	// The first entry is the user's root permission; each further entry becomes an ACL
	// selector with its own patterns. 1 to 16 entries.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Permissions []ACLPermission `json:"permissions"`
}

// ACLPermission grants the commands of one ValkeyRole on a set of key and channel patterns.
type ACLPermission struct {
	// roleRef names the (cluster-scoped) ValkeyRole whose categories and commands apply.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="roleRef must name a ValkeyRole: a lowercase DNS name such as read-write"
	RoleRef string `json:"roleRef"`

	// keys are the key patterns the role's commands may touch. Required, with no default:
	// an empty list grants commands on no key at all. At most 16 entries.
	// +kubebuilder:validation:MaxItems=16
	Keys []KeyPattern `json:"keys"`

	// channels are Pub/Sub channel patterns, without Valkey's '&' prefix. Omitted, the
	// user gets no channel. At most 16 entries of 128 characters.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r"""^[^\s"'\pC]+$""")`,message="channel patterns must be non-empty and contain no spaces, quotes or control characters; write them without the & prefix, like orders:*"
	// +kubebuilder:validation:items:XValidation:rule=`!self.startsWith('&') && !self.contains('(') && !self.contains(')')`,message="channel patterns must not start with & (the operator writes it) nor contain ( or ): Valkey's ACL syntax reads those as the bounds of a selector, which would change other permissions"
	Channels []string `json:"channels,omitempty"`
}

// KeyPattern is a glob over key names and what the user may do with the matching keys.
type KeyPattern struct {
	// pattern is a Valkey glob such as myapp:*, without Valkey's '~' or '%R~' prefix (the
	// operator writes the prefix that matches access). At most 256 characters.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"""^[^\s"'\pC]+$""")`,message="key patterns must be non-empty and contain no spaces, quotes or control characters; write them without the ~ prefix, like myapp:*"
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('~') && !self.startsWith('%') && !self.contains('(') && !self.contains(')')`,message="key patterns must not start with ~ or % (the operator writes the prefix that matches access) nor contain ( or ): Valkey's ACL syntax reads those as the bounds of a selector, which would change other permissions"
	Pattern string `json:"pattern"`

	// access is read, write or readwrite (the default).
	// +optional
	// +kubebuilder:default=readwrite
	Access KeyAccess `json:"access,omitempty"`
}

// KeyAccess is what a permission allows on the keys matching its pattern.
// +kubebuilder:validation:Enum=read;write;readwrite
type KeyAccess string

// The key access modes, rendered as Valkey's %R~, %W~ and ~ key selectors.
const (
	// KeyAccessRead allows reading matching keys only (%R~pattern).
	KeyAccessRead KeyAccess = "read"
	// KeyAccessWrite allows writing matching keys only (%W~pattern).
	KeyAccessWrite KeyAccess = "write"
	// KeyAccessReadWrite allows both (~pattern). It is the default.
	KeyAccessReadWrite KeyAccess = "readwrite"
)
