package kubelet

import (
	"slices"
	"testing"
)

func TestValkeyImageEntrypoint(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{nil, []string{"valkey-server"}},
		{[]string{"--port", "7000"}, []string{"valkey-server", "--port", "7000"}},
		{[]string{"/etc/valkey/valkey.conf"}, []string{"valkey-server", "/etc/valkey/valkey.conf"}},
		{[]string{"valkey-cli", "-c", "-h", "my-cluster.my-app.svc.cluster.local"}, []string{"valkey-cli", "-c", "-h", "my-cluster.my-app.svc.cluster.local"}},
		{[]string{"sh", "-c", "echo hi"}, []string{"sh", "-c", "echo hi"}},
	} {
		if got := valkeyImageEntrypoint(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("args %q: runs %q, want %q", tc.args, got, tc.want)
		}
	}
}
