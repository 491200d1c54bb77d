package v1alpha1_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// status.nodes is the original's list of pod names; a status an older operator wrote there as
// objects (now nodeDetails) still decodes, to the names of its pods, until the next write.
func TestNodeNamesDecodesNamesAndOlderObjects(t *testing.T) {
	for _, c := range []struct {
		name, json string
		want       v1alpha1.NodeNames
	}{
		{"names", `{"nodes":["a-1","a-2"]}`, v1alpha1.NodeNames{"a-1", "a-2"}},
		{"older objects", `{"nodes":[{"pod":"a-1","shard":0,"role":"primary","nodeId":"x","ready":true},{"pod":"a-2","shard":0,"ready":false}]}`, v1alpha1.NodeNames{"a-1", "a-2"}},
		{"empty", `{"nodes":[]}`, v1alpha1.NodeNames{}},
		{"null", `{"nodes":null}`, nil},
		{"absent", `{}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st v1alpha1.ValkeyClusterStatus
			if err := json.Unmarshal([]byte(c.json), &st); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(st.Nodes, c.want) || (st.Nodes == nil) != (c.want == nil) {
				t.Errorf("nodes %#v, want %#v", st.Nodes, c.want)
			}
		})
	}
	var st v1alpha1.ValkeyClusterStatus
	if err := json.Unmarshal([]byte(`{"nodes":[3]}`), &st); err == nil {
		t.Errorf("a number decoded as a node: %#v", st.Nodes)
	}
	out, err := json.Marshal(v1alpha1.ValkeyClusterStatus{Nodes: v1alpha1.NodeNames{"a-1"}})
	if err != nil || string(out) != `{"shards":0,"readyNodes":0,"nodes":["a-1"]}` {
		t.Errorf("marshalled %s, %v", out, err)
	}
}
