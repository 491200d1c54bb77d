package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/valkey"
)

// Role names checked against the nodes themselves. A ValkeyRole may name any category or command
// the original accepts (^[a-zA-Z][a-zA-Z0-9_-]*$): a module's category (json, bloom, search)
// exists only on nodes that loaded the module, a command only on the Valkey releases that have
// it. A node refuses an ACL file that names one it does not know: ACL LOAD fails, and a pod
// started with that file exits at once ("Aborting Valkey startup because of ACL errors"). So:
//
//  1. Every category and command (command|subcommand) the cluster's bindings use is asked of
//     each node that answered this pass: ACL CAT, and COMMAND LIST FILTERBY PATTERN per name
//     (replies of at most one name each). What a node knows is kept by pod UID: a running node
//     learns no command, and a module loaded at run time only adds names (looked at again when
//     a name is missing).
//  2. A name a node does not know makes the cluster Invalid, naming the role, the name and the
//     node, before the ACL Secret is rendered: the nodes keep the ACL they enforce, and pods
//     created meanwhile mount the last file every node accepted.
//  3. A node that could not be asked (no answer, NOPERM before the operator's ACL grants ACL CAT
//     and COMMAND LIST) is no evidence either way. With no node asked this pass (a new cluster,
//     or every node down), the commands are checked against the list of Valkey 8.0's and 9.1's
//     (acl.CheckCommands); categories cannot be (a module's exist only where it is loaded), and
//     a pod whose Valkey refuses the file fails on start, which status says.

// roleName is one category or command a role of the cluster's bindings names.
type roleName struct {
	role, kind, name string // kind: "category" or "command"
}

// usedRoleNames lists the categories and commands the bindings' roles name, each once (the
// first role naming it), in the order of the bindings. The built-in category all, which ACL CAT
// does not list, is left out.
func usedRoleNames(users *resolvedACL) []roleName {
	if users == nil {
		return nil
	}
	var out []roleName
	seen := map[string]bool{}
	add := func(role, kind, name string) {
		key := kind + "/" + strings.ToLower(name)
		if !seen[key] {
			seen[key] = true
			out = append(out, roleName{role: role, kind: kind, name: name})
		}
	}
	for _, b := range users.bindings {
		for _, p := range b.Permissions {
			spec, ok := users.roles[p.RoleRef]
			if !ok {
				continue
			}
			for _, c := range spec.Categories {
				if !strings.EqualFold(c.Name, "all") {
					add(p.RoleRef, "category", c.Name)
				}
			}
			for _, c := range spec.Commands {
				name := c.Name
				if c.Subcommand != "" {
					name += "|" + c.Subcommand
				}
				add(p.RoleRef, "command", name)
			}
		}
	}
	return out
}

// nodeNames is what one node (pod UID) is known to know: its categories and the commands asked.
type nodeNames struct {
	categories map[string]bool
	commands   map[string]bool
}

// knownNames keeps nodeNames by cluster and pod UID (rule 1).
type knownNames struct {
	mu    sync.Mutex
	nodes map[string]map[types.UID]*nodeNames
}

func (k *knownNames) get(cluster string, uid types.UID) *nodeNames {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nodes == nil {
		k.nodes = map[string]map[types.UID]*nodeNames{}
	}
	if k.nodes[cluster] == nil {
		k.nodes[cluster] = map[types.UID]*nodeNames{}
	}
	n := k.nodes[cluster][uid]
	if n == nil {
		n = &nodeNames{commands: map[string]bool{}}
		k.nodes[cluster][uid] = n
	}
	return n
}

// retain drops the nodes of cluster whose pods are not in live.
func (k *knownNames) retain(cluster string, live map[types.UID]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid := range k.nodes[cluster] {
		if !live[uid] {
			delete(k.nodes[cluster], uid)
		}
	}
}

func (k *knownNames) forget(cluster string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.nodes, cluster)
}

// roleNamesProblem returns why the cluster is Invalid when a node that answered this pass does
// not know a name its bindings use (rule 2), "" otherwise. The nodes are asked in the order of
// the pass's pods; one that cannot be asked is skipped (rule 3).
func (r *ValkeyClusterReconciler) roleNamesProblem(ctx context.Context, vc *v1.ValkeyCluster, users *resolvedACL, obs *observation, creds valkey.Credentials) string {
	cluster := clusterKey(vc)
	live := map[types.UID]bool{}
	for _, p := range obs.pods {
		live[p.UID] = true
	}
	r.names.retain(cluster, live)
	names := usedRoleNames(users)
	if len(names) == 0 {
		return ""
	}
	asked := false
	for _, sp := range obs.snapshot.Pods {
		pod, ok := obs.pods[sp.Name]
		if !ok || sp.Deleting || sp.Node == nil || !sp.Node.Reachable {
			continue
		}
		missing, answered := r.unknownTo(ctx, vc, obs, pod, creds, names)
		asked = asked || answered
		if missing != nil {
			what := "ACL CAT"
			if missing.kind == "command" {
				what = "COMMAND LIST"
			}
			return fmt.Sprintf("ValkeyRole %q: %s %q is not known to node %s (%s): a node refuses an ACL file that names it, "+
				"and a new pod would fail to start; %s, or remove the rule", missing.role, missing.kind, missing.name, pod.Name, what, fixFor(missing.kind))
		}
	}
	if !asked {
		for _, b := range users.bindings {
			for _, p := range b.Permissions {
				if problem := acl.CheckCommands(p.RoleRef, users.roles[p.RoleRef]); problem != "" {
					return problem
				}
			}
		}
	}
	return ""
}

// fixFor says how a name a node does not know is made known.
func fixFor(kind string) string {
	if kind == "category" {
		return "load the module that provides the category on every node (loadmodule in the ValkeyConfig)"
	}
	return "check the command's spelling and that every node's Valkey release has it"
}

// unknownTo is the first of names the node of pod does not know, nil when it knows all of them
// or could not be asked; answered says whether the node answered for every name.
func (r *ValkeyClusterReconciler) unknownTo(ctx context.Context, vc *v1.ValkeyCluster, obs *observation, pod *corev1.Pod, creds valkey.Credentials, names []roleName) (_ *roleName, answered bool) {
	known := r.names.get(clusterKey(vc), pod.UID)
	var ask []string
	for _, n := range names {
		if n.kind == "command" {
			if _, asked := known.commands[strings.ToLower(n.name)]; !asked {
				ask = append(ask, n.name)
			}
		}
	}
	needCats := known.categories == nil || slices.ContainsFunc(names, func(n roleName) bool {
		return n.kind == "category" && !known.categories[strings.ToLower(n.name)]
	})
	if needCats || len(ask) > 0 {
		c, err := r.nodeClient(vc, obs, pod.Name, creds)
		if err != nil {
			return nil, false
		}
		if needCats {
			cats, err := c.ACLCategories(ctx)
			if err != nil {
				return nil, false
			}
			known.categories = map[string]bool{}
			for _, cat := range cats {
				known.categories[cat] = true
			}
		}
		if len(ask) > 0 {
			got, err := c.KnownCommands(ctx, ask)
			if err != nil {
				return nil, false
			}
			for name, ok := range got {
				known.commands[strings.ToLower(name)] = ok
			}
		}
	}
	for i, n := range names {
		switch n.kind {
		case "category":
			if !known.categories[strings.ToLower(n.name)] {
				return &names[i], true
			}
		case "command":
			if !known.commands[strings.ToLower(n.name)] {
				delete(known.commands, strings.ToLower(n.name)) // asked again next pass (rule 1)
				return &names[i], true
			}
		}
	}
	return nil, true
}
