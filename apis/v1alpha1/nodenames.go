package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// NodeNames is status.nodes: the names of the cluster's pods, a list of strings as in the
// original's schema, so that a client generated from the original's CRD decodes a ValkeyCluster.
//
// Operators before this one wrote objects there (what status.nodeDetails holds now). A stored
// status keeps them until the operator's next status write, so they are read as well: the pod
// name of each object (its "pod" field). The type in the schema is still a list of strings; the
// API server does not check stored objects against it until they are written again.
// +kubebuilder:validation:items:MaxLength=253
type NodeNames []string

// UnmarshalJSON reads a list of pod names, or of the objects an older operator wrote (their
// "pod" field).
func (n *NodeNames) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*n = nil
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("status.nodes: %w", err)
	}
	out := make(NodeNames, 0, len(raw))
	for _, item := range raw {
		var name string
		if err := json.Unmarshal(item, &name); err == nil {
			out = append(out, name)
			continue
		}
		var legacy struct {
			Pod string `json:"pod"`
		}
		if err := json.Unmarshal(item, &legacy); err != nil {
			return fmt.Errorf("status.nodes: an item is neither a pod name nor a node object: %w", err)
		}
		out = append(out, legacy.Pod)
	}
	*n = out
	return nil
}
