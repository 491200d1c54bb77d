package controllers

import (
	"strings"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/liveconf"
)

// A node's valkey.conf after its live settings changed holds the lines a node created now would
// get (here in the same order; a non-live directive sorted between two live ones would put them
// elsewhere, and each directive is set once, so order does not matter to Valkey).
func TestWithLiveSettingsMatchesANewNode(t *testing.T) {
	for _, tls := range []bool{false, true} {
		vc, rc := newTestCluster(), newResolved()
		announce := ""
		if tls {
			vc.Spec.TLS = &v1.TLSSpec{SecretRef: "vc-tls"}
			announce = "my-cluster-8c04d.my-cluster.my-app.svc.cluster.local"
		}
		rc.Valkey = map[string]string{"maxmemory": "1500mb", "maxmemory-policy": "allkeys-lru", "databases": "4"}
		before := renderValkeyConf(rc, announce)
		rc.Valkey = map[string]string{"maxmemory": "2gb", "hz": "20", "databases": "4"}
		want := renderValkeyConf(rc, announce)
		got := withLiveSettings(before, liveconf.Live(valkeySettings(rc, tls)))
		if got != want {
			t.Errorf("tls %v: rewritten\n%s\nwant\n%s", tls, got, want)
		}
		if again := withLiveSettings(got, liveconf.Live(valkeySettings(rc, tls))); again != got {
			t.Errorf("tls %v: rewriting twice changed the file", tls)
		}
	}
	// Every live setting removed: their lines go, the rest stays.
	conf := "# header\nport 6379\nhz 20\nmaxmemory 1gb\nsave \"\"\n"
	if got := withLiveSettings(conf, nil); got != "# header\nport 6379\nsave \"\"\n" {
		t.Errorf("removing every live setting: %q", got)
	}
	if strings.Contains(withLiveSettings("# hz 5\n", map[string]string{"hz": "6"}), "# hz 6") {
		t.Error("a comment was taken for a setting")
	}
}
