package v1alpha1

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckNetworkClients reports the first entry of spec.network.clients that a NetworkPolicy would
// refuse and the schema lets through: a label selector that is not one (a key or value that is
// no label's, an operator with the wrong values), or an ipBlock whose cidr or except is no CIDR,
// or an except outside its cidr. The operator's policy would be refused on every pass; the
// cluster is Invalid with this reason instead. (CEL's isCIDR would say it at admission, but only
// API servers from 1.31 know it, and the CRD must install on 1.29.)
//
// It also bounds what one entry may hold, as the schema bounds the entries (32): the NetworkPolicy
// carries every term, and the operator keeps the cluster in memory, so a team's entry of
// thousands of terms costs every team. The bounds are far above a policy written by hand.
func CheckNetworkClients(n *Network) error {
	if n == nil {
		return nil
	}
	path := field.NewPath("spec", "network", "clients")
	for i, p := range n.Clients {
		at := path.Index(i)
		opts := metav1validation.LabelSelectorValidationOptions{}
		for name, sel := range map[string]*metav1.LabelSelector{"podSelector": p.PodSelector, "namespaceSelector": p.NamespaceSelector} {
			if err := boundSelector(sel, at.Child(name)); err != nil {
				return err
			}
		}
		if p.IPBlock != nil && len(p.IPBlock.Except) > MaxClientExcepts {
			return fmt.Errorf("%s: %d CIDRs, at most %d", at.Child("ipBlock", "except"), len(p.IPBlock.Except), MaxClientExcepts)
		}
		if p.PodSelector != nil {
			if errs := metav1validation.ValidateLabelSelector(p.PodSelector, opts, at.Child("podSelector")); len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		if p.NamespaceSelector != nil {
			if errs := metav1validation.ValidateLabelSelector(p.NamespaceSelector, opts, at.Child("namespaceSelector")); len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		if b := p.IPBlock; b != nil {
			cidr, err := netip.ParsePrefix(b.CIDR)
			if err != nil {
				return fmt.Errorf("%s: %q is not a CIDR such as 10.0.0.0/8", at.Child("ipBlock", "cidr"), b.CIDR)
			}
			for j, e := range b.Except {
				ex, err := netip.ParsePrefix(e)
				if err != nil || !cidr.Contains(ex.Addr()) || ex.Bits() <= cidr.Bits() {
					return fmt.Errorf("%s: %q must be a CIDR strictly inside %s", at.Child("ipBlock", "except").Index(j), e, b.CIDR)
				}
			}
		}
	}
	return nil
}

// The bounds of one spec.network.clients entry (CheckNetworkClients).
const (
	// MaxClientExcepts bounds an ipBlock's except list.
	MaxClientExcepts = 32
	// MaxSelectorTerms bounds a selector's matchLabels and matchExpressions together.
	MaxSelectorTerms = 32
	// MaxExpressionValues bounds one matchExpression's values.
	MaxExpressionValues = 64
)

// boundSelector reports a selector holding more terms, or an expression more values, than
// CheckNetworkClients allows.
func boundSelector(sel *metav1.LabelSelector, at *field.Path) error {
	if sel == nil {
		return nil
	}
	if n := len(sel.MatchLabels) + len(sel.MatchExpressions); n > MaxSelectorTerms {
		return fmt.Errorf("%s: %d matchLabels and matchExpressions, at most %d together", at, n, MaxSelectorTerms)
	}
	for i, e := range sel.MatchExpressions {
		if len(e.Values) > MaxExpressionValues {
			return fmt.Errorf("%s: %d values, at most %d", at.Child("matchExpressions").Index(i).Child("values"), len(e.Values), MaxExpressionValues)
		}
	}
	return nil
}
