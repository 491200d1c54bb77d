package valkey

import (
	"maps"
	"testing"
)

func TestParseInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{
			// CLUSTER INFO from valkey-server 8.0.1, CRLF as sent on the wire.
			name: "cluster info",
			in: "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n" +
				"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:4\r\ncluster_size:3\r\n" +
				"cluster_current_epoch:3\r\ncluster_my_epoch:1\r\n",
			want: map[string]string{
				"cluster_state": "ok", "cluster_slots_assigned": "16384", "cluster_slots_ok": "16384",
				"cluster_slots_pfail": "0", "cluster_slots_fail": "0", "cluster_known_nodes": "4",
				"cluster_size": "3", "cluster_current_epoch": "3", "cluster_my_epoch": "1",
			},
		},
		{
			name: "info replication of a replica",
			in: "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:27001\r\n" +
				"master_link_status:down\r\nmaster_last_io_seconds_ago:-1\r\nslave_repl_offset:1\r\n" +
				"master_repl_offset:0\r\nsecond_repl_offset:-1\r\n",
			want: map[string]string{
				"role": "slave", "master_host": "127.0.0.1", "master_port": "27001",
				"master_link_status": "down", "master_last_io_seconds_ago": "-1", "slave_repl_offset": "1",
				"master_repl_offset": "0", "second_repl_offset": "-1",
			},
		},
		{
			name: "several sections, colons in values, junk lines",
			in:   "# Server\nvalkey_version:8.0.1\n\n# Replication\nmaster_host:::1\nslave0:ip=10.0.0.2,port=6379,state=online,offset=42,lag=0\nno colon here\n:nokey\n",
			want: map[string]string{
				"valkey_version": "8.0.1", "master_host": "::1",
				"slave0": "ip=10.0.0.2,port=6379,state=online,offset=42,lag=0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseInfo(tt.in); !maps.Equal(got, tt.want) {
				t.Errorf("ParseInfo = %v\nwant %v", got, tt.want)
			}
		})
	}
}
