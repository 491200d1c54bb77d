package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValkeyConfigSpec is a named profile for the nodes of a cluster: image, resources, valkey.conf
// directives and platform-level ACL bindings. Every field is optional, because a config may
// inherit it from its baseRef; the resolved chain must name an image.
//
// Inheritance (resolved by the operator, not at admission): a child's imageRef and each of
// resources.cpu / resources.memory override the base's; the valkey maps merge key by key, the
// child winning; acl is replaced, not merged (the first config up the chain that sets acl
// supplies the whole list, and an explicit empty list clears the inherited bindings). A missing
// base or a cycle makes every cluster using the config Invalid.
//
// A node's image, resources and valkey.conf are fixed when it is created. A change here rolls
// every cluster that uses the config: its nodes are replaced one shard at a time, with one
// graceful failover per shard.
//
// Its deepcopy is hand-written (deepcopy.go): controller-gen's generator mishandles the
// DirectiveValue alias.
// +kubebuilder:object:generate=false
type ValkeyConfigSpec struct {
	// imageRef names the ValkeyImage the nodes run. Omitted, it comes from the base.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="imageRef must name a ValkeyImage: a lowercase DNS name such as valkey-9-0"
	ImageRef string `json:"imageRef,omitempty"`

	// baseRef names another ValkeyConfig to inherit from; fields set here override it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="baseRef must name a ValkeyConfig: a lowercase DNS name such as base"
	BaseRef string `json:"baseRef,omitempty"`

	// resources are the CPU and memory of each Valkey container, used as both request and
	// limit.
	// +optional
	Resources *ValkeyResources `json:"resources,omitempty"`

	// valkey holds valkey.conf directives, name to value, such as maxmemory: 1500mb, passed
	// through to every node's valkey.conf. Names are lowercase. The operator's forced settings
	// (port, bind, protected-mode, dir, aclfile, primaryuser, primaryauth and their master*
	// names, cluster-enabled, cluster-node-timeout, cluster-config-file, cluster-port, and the
	// TLS-mode tls-port, tls-cluster, tls-replication, tls-cert-file, tls-key-file,
	// tls-ca-cert-file, tls-auth-clients, cluster-announce-hostname,
	// cluster-preferred-endpoint-type, and the announced addresses cluster-announce-ip,
	// -port, -bus-port, -tls-port, -client-ipv4, -client-ipv6, replica-announce-ip and -port)
	// are refused rather than silently overridden, as are
	// directives that cannot work beside them: logfile, daemonize, include, user, requirepass,
	// replicaof, slaveof, rename-command, and loadmodule (no team may load native code into a
	// node of a shared platform). enable-debug-command, enable-module-command and
	// enable-protected-configs may only be no. The settings applied live (maxmemory,
	// maxmemory-policy, maxmemory-samples, hz, timeout, maxclients, slowlog-log-slower-than,
	// slowlog-max-len, latency-monitor-threshold, lazyfree-lazy-eviction, lazyfree-lazy-expire)
	// must be values Valkey takes, written without quotes. Every other directive passes through.
	// Values are one line of at most 4096 characters; at most 256 entries (bounds the API server
	// needs to estimate the cost of these rules).
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))",messageExpression="'valkey directive names must be lowercase letters, digits and dashes, as valkey.conf writes them (maxmemory-policy), so that the refusal of forced directives sees every spelling: ' + (self.filter(k, !k.matches('^[a-z0-9][a-z0-9-]*$'))[0].replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t').matches('^[ -~]*$') ? self.filter(k, !k.matches('^[a-z0-9][a-z0-9-]*$'))[0].replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t') : 'a key holding a control or non-ASCII character')"
	// +kubebuilder:validation:XValidation:rule="!('logfile' in self)",message="valkey directive logfile cannot be set: node logs must go to stdout, where kubectl logs shows them; remove logfile from spec.valkey (loglevel is allowed)"
	// +kubebuilder:validation:XValidation:rule="!('aclfile' in self)",message="valkey directive aclfile cannot be set (forced: the operator renders and mounts the node's data directory and ACL file); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('bind' in self)",message="valkey directive bind cannot be set (forced: the Service, the probes and the operator reach every node on port 6379 of its pod IP); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-hostname' in self)",message="valkey directive cluster-announce-hostname cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-ip' in self)",message="valkey directive cluster-announce-ip cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-port' in self)",message="valkey directive cluster-announce-port cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-bus-port' in self)",message="valkey directive cluster-announce-bus-port cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-tls-port' in self)",message="valkey directive cluster-announce-tls-port cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-client-ipv4' in self)",message="valkey directive cluster-announce-client-ipv4 cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-announce-client-ipv6' in self)",message="valkey directive cluster-announce-client-ipv6 cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('replica-announce-ip' in self)",message="valkey directive replica-announce-ip cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('replica-announce-port' in self)",message="valkey directive replica-announce-port cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('slave-announce-ip' in self)",message="valkey directive slave-announce-ip cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('slave-announce-port' in self)",message="valkey directive slave-announce-port cannot be set (forced: peers, replicas, clients and the operator reach every node at its pod IP on ports 6379 and 16379; another announced address cuts the node off from its cluster); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-config-file' in self)",message="valkey directive cluster-config-file cannot be set (forced: the operator runs every node in cluster mode with its own bus settings and failure-detection timeout); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-enabled' in self)",message="valkey directive cluster-enabled cannot be set (forced: the operator runs every node in cluster mode with its own bus settings and failure-detection timeout); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-node-timeout' in self)",message="valkey directive cluster-node-timeout cannot be set (forced: the operator runs every node in cluster mode with its own bus settings and failure-detection timeout); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-port' in self)",message="valkey directive cluster-port cannot be set (forced: the operator runs every node in cluster mode with its own bus settings and failure-detection timeout); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('cluster-preferred-endpoint-type' in self)",message="valkey directive cluster-preferred-endpoint-type cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('daemonize' in self)",message="valkey directive daemonize cannot be set (valkey-server must stay the container's foreground process, or the pod exits as soon as it starts); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('dir' in self)",message="valkey directive dir cannot be set (forced: the operator renders and mounts the node's data directory and ACL file); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('include' in self)",message="valkey directive include cannot be set (the operator includes its own file of credentials; another include could override forced settings); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('loadmodule' in self)",message="valkey directive loadmodule cannot be set (a module is native code loaded into valkey-server, with every key and every user of the node; on a platform shared by teams none may load one); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('masterauth' in self)",message="valkey directive masterauth cannot be set (forced: replicas authenticate to their primary as the operator's replication user); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('masteruser' in self)",message="valkey directive masteruser cannot be set (forced: replicas authenticate to their primary as the operator's replication user); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('port' in self)",message="valkey directive port cannot be set (forced: the Service, the probes and the operator reach every node on port 6379 of its pod IP); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('primaryauth' in self)",message="valkey directive primaryauth cannot be set (forced: replicas authenticate to their primary as the operator's replication user); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('primaryuser' in self)",message="valkey directive primaryuser cannot be set (forced: replicas authenticate to their primary as the operator's replication user); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('protected-mode' in self)",message="valkey directive protected-mode cannot be set (forced: the Service, the probes and the operator reach every node on port 6379 of its pod IP); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('rename-command' in self)",message="valkey directive rename-command cannot be set (renaming CLUSTER, ACL or CONFIG would lock the operator out); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('replicaof' in self)",message="valkey directive replicaof cannot be set (Valkey refuses replicaof in cluster mode; the operator assigns replicas to shards); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('requirepass' in self)",message="valkey directive requirepass cannot be set (the operator's ACL file defines the default user, so requirepass would be silently overridden; bind default in spec.acl); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('slaveof' in self)",message="valkey directive slaveof cannot be set (Valkey refuses replicaof in cluster mode; the operator assigns replicas to shards); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-auth-clients' in self)",message="valkey directive tls-auth-clients cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-ca-cert-file' in self)",message="valkey directive tls-ca-cert-file cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-cert-file' in self)",message="valkey directive tls-cert-file cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-cluster' in self)",message="valkey directive tls-cluster cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-key-file' in self)",message="valkey directive tls-key-file cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-port' in self)",message="valkey directive tls-port cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('tls-replication' in self)",message="valkey directive tls-replication cannot be set (forced in TLS mode: TLS is configured from the ValkeyCluster's spec.tls, and a ValkeyConfig may serve TLS and plaintext clusters alike); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule="!('user' in self)",message="valkey directive user cannot be set (Valkey refuses user lines beside the operator's ACL file; bind users in spec.acl with ValkeyRoles); remove it from spec.valkey"
	// +kubebuilder:validation:XValidation:rule=`!('enable-debug-command' in self) || self['enable-debug-command'].matches('^(?i:no)$')`,message="valkey directive enable-debug-command can only be no (DEBUG can crash, stall or rewrite a node; yes, or local, which anyone who may exec into the pod meets, would open it to every team's clients on a shared platform); remove it from spec.valkey or set it to no"
	// +kubebuilder:validation:XValidation:rule=`!('enable-module-command' in self) || self['enable-module-command'].matches('^(?i:no)$')`,message="valkey directive enable-module-command can only be no (MODULE LOAD runs native code of the client's choosing inside the node; yes, or local, which anyone who may exec into the pod meets, would open it to every team's clients on a shared platform); remove it from spec.valkey or set it to no"
	// +kubebuilder:validation:XValidation:rule=`!('enable-protected-configs' in self) || self['enable-protected-configs'].matches('^(?i:no)$')`,message="valkey directive enable-protected-configs can only be no (CONFIG SET of dir, dbfilename and the other protected settings lets a client write files wherever the node may; yes, or local, which anyone who may exec into the pod meets, would open it to every team's clients on a shared platform); remove it from spec.valkey or set it to no"
	// +kubebuilder:validation:XValidation:rule=`!('hz' in self) || (self['hz'].matches('^(0|[1-9][0-9]{0,9})$') && int(self['hz']) <= 2147483647)`,message="valkey directive hz must be a whole number from 0 to 2147483647 (Valkey runs it between 1 and 500)"
	// +kubebuilder:validation:XValidation:rule=`!('latency-monitor-threshold' in self) || self['latency-monitor-threshold'].matches('^(0|[1-9][0-9]{0,17})$')`,message="valkey directive latency-monitor-threshold must be a whole number of milliseconds from 0 (off) to 999999999999999999"
	// +kubebuilder:validation:XValidation:rule=`!('lazyfree-lazy-eviction' in self) || self['lazyfree-lazy-eviction'].matches('^(?i:yes|no)$')`,message="valkey directive lazyfree-lazy-eviction must be yes or no"
	// +kubebuilder:validation:XValidation:rule=`!('lazyfree-lazy-expire' in self) || self['lazyfree-lazy-expire'].matches('^(?i:yes|no)$')`,message="valkey directive lazyfree-lazy-expire must be yes or no"
	// +kubebuilder:validation:XValidation:rule=`!('maxclients' in self) || (self['maxclients'].matches('^[1-9][0-9]{0,9}$') && int(self['maxclients']) <= 4294967295)`,message="valkey directive maxclients must be a whole number from 1 to 4294967295"
	// +kubebuilder:validation:XValidation:rule=`!('maxmemory' in self) || self['maxmemory'].matches('^([0-9]{1,19}[bB]?|[0-9]{1,16}[kK][bB]?|[0-9]{1,13}[mM][bB]?|[0-9]{1,10}[gG][bB]?)$')`,message="valkey directive maxmemory must be a size in bytes with an optional unit, without quotes: 1500mb, 2gb, 0 for no limit (k, m, g are powers of 1000, kb, mb, gb of 1024; no fraction, no percentage)"
	// +kubebuilder:validation:XValidation:rule=`!('maxmemory-policy' in self) || self['maxmemory-policy'].matches('^(?i:volatile-lru|volatile-lfu|volatile-random|volatile-ttl|allkeys-lru|allkeys-lfu|allkeys-random|noeviction)$')`,message="valkey directive maxmemory-policy must be one of volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
	// +kubebuilder:validation:XValidation:rule=`!('maxmemory-samples' in self) || self['maxmemory-samples'].matches('^([1-9]|[1-5][0-9]|6[0-4])$')`,message="valkey directive maxmemory-samples must be a whole number from 1 to 64"
	// +kubebuilder:validation:XValidation:rule=`!('slowlog-log-slower-than' in self) || self['slowlog-log-slower-than'].matches('^(-1|0|[1-9][0-9]{0,17})$')`,message="valkey directive slowlog-log-slower-than must be a whole number of microseconds from -1 (log nothing) to 999999999999999999"
	// +kubebuilder:validation:XValidation:rule=`!('slowlog-max-len' in self) || self['slowlog-max-len'].matches('^(0|[1-9][0-9]{0,17})$')`,message="valkey directive slowlog-max-len must be a whole number from 0 to 999999999999999999"
	// +kubebuilder:validation:XValidation:rule=`!('timeout' in self) || (self['timeout'].matches('^(0|[1-9][0-9]{0,9})$') && int(self['timeout']) <= 2147483647)`,message="valkey directive timeout must be a whole number of seconds from 0 (idle clients are never closed) to 2147483647"
	Valkey map[string]ConfigDirectiveValue `json:"valkey,omitempty"`

	// acl are platform-level user bindings, applied to every cluster that uses this config.
	// A cluster's own spec.acl adds to them but may not bind a username bound here. At most
	// 64 entries, one per username. A change reaches the running nodes of every cluster that
	// uses the config, as with spec.acl.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.username == a.username))",message="duplicate username in ACL bindings: each username may be bound only once; merge the entries into one"
	ACL []ACLBinding `json:"acl,omitempty"`
}

// ValkeyResources are the CPU and memory of each Valkey container; each is both the request
// and the limit (Guaranteed QoS when both are set). Keep memory comfortably above the valkey
// maxmemory directive: replication buffers and fork copy-on-write live outside maxmemory.
type ValkeyResources struct {
	// cpu is a Kubernetes quantity such as "500m" or "2".
	// +optional
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="resources.cpu must be greater than zero, like \"500m\" or \"2\""
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory is a Kubernetes quantity such as "512Mi" or "16Gi".
	// +optional
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="resources.memory must be greater than zero, like \"512Mi\" or \"2Gi\""
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// ValkeyConfigStatus is empty: the original API has a status subresource for ValkeyConfig
// and defines no field in it.
type ValkeyConfigStatus struct{}

// ValkeyConfig is a named profile that clusters select with spec.configRef. Cluster-scoped.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vkconf,categories=valkey
// +kubebuilder:printcolumn:name="ImageRef",type=string,JSONPath=`.spec.imageRef`
// +kubebuilder:printcolumn:name="BaseRef",type=string,JSONPath=`.spec.baseRef`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.baseRef) || self.spec.baseRef != self.metadata.name",message="spec.baseRef cannot name the ValkeyConfig itself: a config inherits from another config",fieldPath=".spec.baseRef"
type ValkeyConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the profile; every field is optional.
	Spec ValkeyConfigSpec `json:"spec"`
	// status is empty.
	Status ValkeyConfigStatus `json:"status,omitempty"`
}

// ValkeyConfigList is a list of ValkeyConfig.
// +kubebuilder:object:root=true
type ValkeyConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ValkeyConfigs.
	Items []ValkeyConfig `json:"items"`
}

// DirectiveValue is the value of one valkey.conf directive, one line of at most 4096
// characters: a line break would start another directive and smuggle in an owned one. It is
// an alias of string, so spec.valkey stays a map[string]string in Go; the alias exists to carry
// the schema of the map's values, which also bounds their length so that the API server's CEL
// cost estimate of the rule fits its budget.
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="valkey directive values must be one line: a line break would start another directive"
type DirectiveValue = string

// ConfigDirectiveValue is a DirectiveValue as a ValkeyConfig holds it: its quotes must also be
// ones valkey.conf can read (a value that opens a quote and never closes it would stop every new
// node at start). A ValkeyNode's settings are rendered by the operator from a config that passed
// this rule (and CheckDirective), and its map of up to 1 024 settings would put the rule over the
// API server's CEL cost budget, so they keep the plain DirectiveValue.
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="valkey directive values must be one line: a line break would start another directive"
// +kubebuilder:validation:XValidation:rule=`self.matches('^([^"\']|"(\\\\.|[^"\\\\])*"(\\s|$)|\'([^\'\\\\]|\\\\+\'|\\\\+[^\'\\\\])*\'(\\s|$))*$')`,message="valkey directive values must be quoted as valkey.conf reads them: a double or single quote that opens a quoted part must close it, and a closing quote must be followed by a space or end the value"
type ConfigDirectiveValue = string
