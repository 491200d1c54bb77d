package v1alpha1

import (
	"maps"
	"slices"
)

// Hand-written deepcopy for the types whose maps have alias-typed values (DirectiveValue,
// LabelValue, AnnotationValue: aliases of string that exist to carry a CRD schema for map
// values).
// controller-gen's deepcopy generator emits an empty copy loop for such maps, so these types
// opt out of generation; TestDeepCopyIsDeep checks that the copies share no memory.

// DeepCopyInto copies the receiver into out; in must be non-nil.
func (in *ValkeyClusterSpec) DeepCopyInto(out *ValkeyClusterSpec) {
	*out = *in
	if in.ACL != nil {
		out.ACL = make([]ACLBinding, len(in.ACL))
		for i := range in.ACL {
			in.ACL[i].DeepCopyInto(&out.ACL[i])
		}
	}
	if in.TLS != nil {
		tls := *in.TLS
		out.TLS = &tls
	}
	out.Placement = in.Placement.DeepCopy()
	out.PodAnnotations = maps.Clone(in.PodAnnotations)
	out.Network = in.Network.DeepCopy()
}

// DeepCopy returns a deep copy of the receiver, or nil for a nil receiver.
func (in *ValkeyClusterSpec) DeepCopy() *ValkeyClusterSpec {
	if in == nil {
		return nil
	}
	out := new(ValkeyClusterSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out; in must be non-nil.
func (in *Placement) DeepCopyInto(out *Placement) {
	*out = *in
	out.Zones = slices.Clone(in.Zones)
	out.NodeSelector = maps.Clone(in.NodeSelector)
}

// DeepCopy returns a deep copy of the receiver, or nil for a nil receiver.
func (in *Placement) DeepCopy() *Placement {
	if in == nil {
		return nil
	}
	out := new(Placement)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out; in must be non-nil.
func (in *ValkeyConfigSpec) DeepCopyInto(out *ValkeyConfigSpec) {
	*out = *in
	out.Resources = in.Resources.DeepCopy()
	out.Valkey = maps.Clone(in.Valkey)
	if in.ACL != nil {
		out.ACL = make([]ACLBinding, len(in.ACL))
		for i := range in.ACL {
			in.ACL[i].DeepCopyInto(&out.ACL[i])
		}
	}
}

// DeepCopy returns a deep copy of the receiver, or nil for a nil receiver.
func (in *ValkeyConfigSpec) DeepCopy() *ValkeyConfigSpec {
	if in == nil {
		return nil
	}
	out := new(ValkeyConfigSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out; in must be non-nil.
func (in *ValkeyNodeSpec) DeepCopyInto(out *ValkeyNodeSpec) {
	*out = *in
	out.ValkeySettings = maps.Clone(in.ValkeySettings)
	out.Placement = in.Placement.DeepCopy()
}

// DeepCopy returns a deep copy of the receiver, or nil for a nil receiver.
func (in *ValkeyNodeSpec) DeepCopy() *ValkeyNodeSpec {
	if in == nil {
		return nil
	}
	out := new(ValkeyNodeSpec)
	in.DeepCopyInto(out)
	return out
}
