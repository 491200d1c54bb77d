package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/resources"
)

// SpecProblem is a reason the spec cannot be carried out (a reference that does not resolve,
// a config cycle): the cluster goes Invalid with Error() as status.message. It is not an
// error to retry.
type SpecProblem struct{ Reason string }

func (p *SpecProblem) Error() string { return p.Reason }

// maxConfigDepth bounds a baseRef chain: at most 10 configs, the cluster's own included
// (reference/api/valkeyconfig.md). A cycle is reported as a chain that exceeds it, with the
// original's message, since it is the same problem to the reader: a chain that does not end.
const maxConfigDepth = 10

// The config-resolution messages, exactly as the original writes them
// (operations/troubleshooting.md quotes them; runbooks search for them). They land in
// status.message and in the log line of the transition to Invalid.
const (
	msgConfigNotFound     = "ValkeyConfig %q not found"
	msgImageNotFound      = "ValkeyImage %q not found"
	msgNoImageRef         = "no image_ref in config chain ending at %q"
	msgConfigDepthExceeds = "config inheritance depth exceeds 10 (cycle?)"
	msgRoleNotFound       = "ValkeyRole %q not found (referenced by user %q)"
)

// resolveConfig reads the ValkeyConfig named name and its baseRef chain, merges them (child
// fields override the base; the valkey maps merge key by key) and resolves the image. A missing
// config, base or image, a chain deeper than maxConfigDepth (a cycle among them), or an owned
// directive in the merged map is a *SpecProblem; API errors other than NotFound are returned as
// they are.
func resolveConfig(ctx context.Context, c client.Reader, name string) (*resources.ResolvedConfig, error) {
	var chain []v1.ValkeyConfig
	for next := name; next != ""; {
		if len(chain) >= maxConfigDepth {
			return nil, &SpecProblem{Reason: msgConfigDepthExceeds}
		}
		var cfg v1.ValkeyConfig
		if err := c.Get(ctx, types.NamespacedName{Name: next}, &cfg); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &SpecProblem{Reason: fmt.Sprintf(msgConfigNotFound, next)}
			}
			return nil, fmt.Errorf("get ValkeyConfig %s: %w", next, err)
		}
		chain = append(chain, cfg)
		next = cfg.Spec.BaseRef
	}
	r := &resources.ResolvedConfig{Valkey: map[string]string{}, ACL: configACL(chain)}
	imageRef := ""
	// Walk from the root base to the child so that children override.
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i].Spec
		r.Chain = append([]string{chain[i].Name}, r.Chain...)
		if s.ImageRef != "" {
			imageRef = s.ImageRef
		}
		if s.Resources != nil {
			if s.Resources.CPU != nil {
				r.Resources.CPU = s.Resources.CPU
			}
			if s.Resources.Memory != nil {
				r.Resources.Memory = s.Resources.Memory
			}
		}
		maps.Copy(r.Valkey, s.Valkey)
		if c := chain[i].Annotations[v1.AnnotationConfirmLiveSettings]; c != "" {
			r.Confirmations = append(r.Confirmations, c)
		}
	}
	// Admission refuses these; a config stored before a rule existed still must not reach
	// valkey.conf, where its line would come after the operator's and win.
	for _, k := range slices.Sorted(maps.Keys(r.Valkey)) {
		if why := v1.RefusedDirective(k, r.Valkey[k]); why != "" {
			return nil, &SpecProblem{Reason: fmt.Sprintf("ValkeyConfig %s sets %q, %s", chainString(chain), k, why)}
		}
	}
	if imageRef == "" {
		// The chain, read from its root base down, ends at the cluster's configRef.
		return nil, &SpecProblem{Reason: fmt.Sprintf(msgNoImageRef, name)}
	}
	var img v1.ValkeyImage
	if err := c.Get(ctx, types.NamespacedName{Name: imageRef}, &img); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &SpecProblem{Reason: fmt.Sprintf(msgImageNotFound, imageRef)}
		}
		return nil, fmt.Errorf("get ValkeyImage %s: %w", imageRef, err)
	}
	r.Image = img.Spec
	return r, nil
}

// configACL is the acl of the first config of chain (the cluster's configRef first) that sets
// it at all: replaced, not merged, along the chain.
func configACL(chain []v1.ValkeyConfig) []v1.ACLBinding {
	for _, cfg := range chain {
		if cfg.Spec.ACL != nil {
			return cfg.Spec.ACL
		}
	}
	return nil
}

func chainString(chain []v1.ValkeyConfig) string {
	names := make([]string, len(chain))
	for i, c := range chain {
		names[i] = c.Name
	}
	return strings.Join(names, " -> ")
}

// resolveRoles reads every ValkeyRole that bindings name. A missing role is a *SpecProblem with
// the original's message (operations/troubleshooting.md), naming the first user that refers to it.
func resolveRoles(ctx context.Context, c client.Reader, bindings []v1.ACLBinding) (map[string]v1.ValkeyRoleSpec, error) {
	roles := map[string]v1.ValkeyRoleSpec{}
	for _, b := range bindings {
		for _, p := range b.Permissions {
			if _, ok := roles[p.RoleRef]; ok {
				continue
			}
			var role v1.ValkeyRole
			if err := c.Get(ctx, types.NamespacedName{Name: p.RoleRef}, &role); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, &SpecProblem{Reason: fmt.Sprintf(msgRoleNotFound, p.RoleRef, b.Username)}
				}
				return nil, fmt.Errorf("get ValkeyRole %s: %w", p.RoleRef, err)
			}
			roles[p.RoleRef] = role.Spec
		}
	}
	return roles, nil
}

// minMaxclients is the lowest maxclients a cluster of nodes runs with: Valkey counts the cluster
// bus links in it, one each way with every other node, and the operator, replication, the
// liveness probe and the slot mover need some more (32, which also covers the pods a roll or a
// scale-out adds for a while). Below it the nodes refuse the connections the cluster itself
// needs (break test: maxclients 16, a 3 -> 4 reshard, every new connection refused on every
// node).
func minMaxclients(nodes int) int { return 2*(nodes-1) + 32 }

// maxclientsProblem is the reason a cluster of nodes cannot run with the merged config's
// maxclients ("" when it can, or when the config leaves Valkey's 10000).
func maxclientsProblem(maxclients string, nodes int) string {
	n, ok := parseMaxclients(maxclients)
	if !ok || n >= minMaxclients(nodes) {
		return ""
	}
	return fmt.Sprintf("maxclients %d is too low for %d nodes: Valkey counts the cluster bus links (2 per other node) in it; set at least %d", n, nodes, minMaxclients(nodes))
}

// parseMaxclients reads a config's maxclients setting; false when it is unset ("", Valkey's
// 10000 applies) or not a number (Valkey refuses it at start-up, reported there).
func parseMaxclients(maxclients string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(maxclients))
	return n, err == nil
}
