package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// earlier is the last commit before the operator took the original's names for what it creates
// (the Service's ports and selector, status.nodes, the credential Secret's keys, the pods' paths).
const earlier = "c1ef0e5"

// earlierOperator builds the operator of commit earlier from this repository's history (git
// archive), once: the binary and its CRDs are kept in ~/.cache/valkey-operator/operator-<commit>.
func earlierOperator(t *testing.T) (binary, crds string) {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".cache", "valkey-operator", "operator-"+earlier)
	binary, crds = filepath.Join(dir, "valkey-operator"), filepath.Join(dir, "crds")
	if _, err := os.Stat(binary); err == nil {
		return binary, crds
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", harness.RepoRoot(), earlier, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the test needs the repository's history): %v\n%s", earlier, err, out)
	}
	start := time.Now()
	build := exec.Command("go", "build", "-o", filepath.Join(src, "valkey-operator"), ".")
	build.Dir, build.Env = src, append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the operator of %s: %v\n%s", earlier, err, out)
	}
	t.Logf("built the operator of %s in %s", earlier, time.Since(start).Round(time.Second))
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "valkey-operator"), filepath.Join(tmp, "valkey-operator")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "manifests", "crds"), filepath.Join(tmp, "crds")); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return binary, crds
}

// installCRDs installs (or updates) the CRDs in dir and waits until they are served.
func installCRDs(t *testing.T, dir string) {
	t.Helper()
	if _, err := envtest.InstallCRDs(harness.Cluster.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorUpgradeKeepsClusters: a 1×1 cluster made by the operator of commit earlier (its
// CRDs, its Service ports client / bus selecting valkey.gomomento.com/cluster, status.nodes as
// objects, a credential Secret with keys password, repl-password, migrate-password, pods with
// /data and /etc/valkey-secret) is taken over by this operator under a writer: the Service is
// updated in place to the original's port names and selector, no pod is replaced, the Secret is
// kept as it is and still opens every node, the status reads as the original's schema; then a
// roll for another reason gives the new pods the original's paths, which Valkey itself reports.
func TestOperatorUpgradeKeepsClusters(t *testing.T) {
	ctx := context.Background()
	oldBinary, oldCRDs := earlierOperator(t)

	// The earlier operator, with its CRDs, makes the cluster.
	harness.Op.Kill(syscall.SIGTERM)
	installCRDs(t, oldCRDs)
	old, err := harness.StartOperator(oldBinary, harness.Cluster, harness.WorkDir, "operator-"+earlier, "RUST_LOG=info")
	if err != nil {
		t.Fatal(err)
	}
	harness.Op = old // so that the package's end stops it, should the test end here
	const ns = "upgraded"
	harness.SetupNamespace(t, ns)
	harness.Create(t, harness.NewImage(ns+"-image"), harness.NewConfig(ns+"-config", ns+"-image"))
	vc := harness.NewCluster(ns, "vc", ns+"-config", harness.WithShards(1), harness.WithReplicas(1))
	harness.Create(t, vc)
	harness.WaitReady(t, vc, 1, 1, nil, harness.FormTimeout)
	pods := podUIDs(t, vc)
	var svc corev1.Service
	if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].Name != "client" || svc.Spec.Selector[v1.LabelCluster] != vc.Name {
		t.Fatalf("the earlier operator's Service: ports %+v, selector %v", svc.Spec.Ports, svc.Spec.Selector)
	}
	var secret corev1.Secret
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: vc.Name + "-operator-auth"}, &secret); err != nil {
		t.Fatal(err)
	}
	if _, ok := secret.Data["password"]; !ok {
		t.Fatalf("the earlier operator's Secret has keys %v", slices.Collect(maps.Keys(secret.Data)))
	}
	w, opts := harness.StartClusterWriter(t, vc)

	// This operator, with its CRDs, over it.
	old.Kill(syscall.SIGTERM)
	installCRDs(t, filepath.Join(harness.RepoRoot(), "manifests", "crds"))
	if harness.Op, err = harness.StartOperator(harness.OperatorBinary, harness.Cluster, harness.WorkDir, "operator", "RUST_LOG=info"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "the Service brought to the original's ports and selector", time.Minute, func() string {
		var now corev1.Service
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(vc), &now); err != nil {
			return err.Error()
		}
		if now.UID != svc.UID {
			t.Fatalf("the Service was replaced (uid %s, was %s)", now.UID, svc.UID)
		}
		var names []string
		for _, p := range now.Spec.Ports {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"valkey", "valkey-bus"}) || now.Spec.Selector["app.kubernetes.io/instance"] != vc.Name {
			return fmt.Sprintf("ports %v, selector %v", names, now.Spec.Selector)
		}
		return ""
	})
	harness.PassMark(t, vc)(3)
	if now := podUIDs(t, vc); !maps.Equal(now, pods) {
		t.Fatalf("pods replaced by the operator upgrade: %v, before %v", now, pods)
	}
	var kept corev1.Secret
	if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(&secret), &kept); err != nil {
		t.Fatal(err)
	}
	if kept.ResourceVersion != secret.ResourceVersion {
		t.Errorf("the earlier operator's credential Secret was rewritten: keys %v", slices.Collect(maps.Keys(kept.Data)))
	}
	statusAsOriginal(t, vc, pods)
	harness.WaitReady(t, vc, 1, 1, nil, time.Minute)
	updates := 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if l.Message() == logging.MsgUpdatingService && l.Ref() == "ValkeyCluster.v1alpha1.valkey.gomomento.com/vc."+ns {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d lines %q, want 1", updates, logging.MsgUpdatingService)
	}

	// A roll for another reason (a setting that needs a restart) gives the new pods the
	// original's paths.
	before := harness.PodNameSet(t, vc)
	harness.EditConfig(t, ns+"-config", func(c *v1.ValkeyConfig) { c.Spec.Valkey["databases"] = "4" })
	harness.WaitRolled(t, vc, 1, 1, before, harness.RollTimeout)
	creds := harness.Creds(t, vc)
	for _, p := range harness.Pods(t, vc) {
		mounts := map[string]string{}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if mounts["data"] != "/var/lib/valkey" || mounts["secret"] != "/etc/valkey/acl" {
			t.Errorf("pod %s mounts %v", p.Name, mounts)
		}
		c, err := valkey.NewClient(harness.PodAddr(p), creds)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ConfigGet(ctx, "dir", "cluster-config-file", "aclfile")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"dir": "/var/lib/valkey", "cluster-config-file": "/var/lib/valkey/nodes.conf", "aclfile": "/etc/valkey/acl/users.acl"}
		if !maps.Equal(got, want) {
			t.Errorf("pod %s: CONFIG GET %v, want %v", p.Name, got, want)
		}
	}
	r := harness.FinishWriter(t, w, vc, opts)
	if r.LostUnreplicated > 0 {
		t.Errorf("%d keys acknowledged by the primary were lost: the upgrade fails nothing over, the roll only gracefully", r.LostUnreplicated)
	}
}

// podUIDs is the cluster's running pods, name to UID.
func podUIDs(t *testing.T, vc *v1.ValkeyCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range harness.Pods(t, vc) {
		out[p.Name] = string(p.UID)
	}
	return out
}

// statusAsOriginal reads vc as unstructured JSON and checks status.nodes is the original's type,
// the pods' names, once this operator has written the status (nodeDetails present).
func statusAsOriginal(t *testing.T, vc *v1.ValkeyCluster, pods map[string]string) {
	t.Helper()
	harness.WaitFor(t, "status.nodes as the original's list of pod names", time.Minute, func() string {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("valkey.gomomento.com/v1alpha1")
		u.SetKind("ValkeyCluster")
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(vc), u); err != nil {
			return err.Error()
		}
		raw, _ := json.Marshal(u.Object["status"])
		var st struct {
			Nodes       []string         `json:"nodes"`
			NodeDetails []map[string]any `json:"nodeDetails"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return "status.nodes is not a list of strings yet: " + err.Error()
		}
		if !slices.Equal(slices.Sorted(slices.Values(st.Nodes)), slices.Sorted(maps.Keys(pods))) || len(st.NodeDetails) != len(pods) {
			return fmt.Sprintf("nodes %v, %d nodeDetails", st.Nodes, len(st.NodeDetails))
		}
		return ""
	})
}
