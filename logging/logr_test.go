package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestLogrAdapterGolden(t *testing.T) {
	var out, errOut bytes.Buffer
	l := New(&out, &errOut, "info,controller_runtime::cache=info,kube_client=info", fixedClock)
	cr := Logr(l, TargetControllerRuntime)

	// controller-runtime's context keys never become fields.
	ctrl := cr.WithValues("controller", "valkeycluster", "controllerGroup", "valkey.gomomento.com",
		"controllerKind", "ValkeyCluster")
	req := ctrl.WithValues("ValkeyCluster", "my-app/my-cluster", "namespace", "my-app", "name", "my-cluster",
		"reconcileID", "5a0c")
	req.Info("Starting workers", "worker count", 1)                      // INFO, capped for bare `info`: dropped
	req.Error(errors.New("boom"), "Reconciler error")                    // replaced by our WARN: dropped
	req.Error(errors.New("lease lost"), "leader election lost", "id", 7) // library error: WARN
	req.V(1).Info("debug detail")                                        // dropped

	cache := cr.WithName("controller-runtime").WithName("cache")
	cache.Info("informer started", "kind", "Pod", "namespace", "my-app") // named target enabled at info
	cr.WithName("eventhandler").WithName("enqueueRequestForOwner").Error(nil, "owner not found")

	RedirectKlog(l)
	defer klog.ClearLogger()
	klog.Info("klog says hi")
	klog.Warningf("watch of %s ended: %s", "*v1.Pod", "too old resource version")
	klog.ErrorS(errors.New("connection refused"), "failed to list", "pod", klog.KRef("my-app", "my-cluster-8c04d"))
	klog.V(4).Info("verbose klog") // below the filter

	if errOut.Len() != 0 {
		t.Errorf("stderr: %q", errOut.String())
	}
	golden(t, "library.golden", out.Bytes())
	for _, banned := range []string{"reconcileID", `"controller"`, "controllerKind", `"namespace"`, "Reconciler error", "Starting workers"} {
		if strings.Contains(out.String(), banned) {
			t.Errorf("output contains %s:\n%s", banned, out.String())
		}
	}
}

func TestLogrEnabled(t *testing.T) {
	var out bytes.Buffer
	cr := Logr(New(&out, nil, "trace", fixedClock), TargetControllerRuntime)
	if cr.Enabled() || cr.V(1).Enabled() {
		t.Error("library INFO/DEBUG enabled by a bare level")
	}
	cr = Logr(New(&out, nil, "controller_runtime=trace", fixedClock), TargetControllerRuntime)
	if !cr.V(5).Enabled() {
		t.Error("library TRACE not enabled by its own directive")
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"controller-runtime": "controller_runtime", "enqueueRequestForOwner": "enqueue_request_for_owner",
		"Informer": "informer", "test-env": "test_env", "v1": "v1", "a b": "a_b",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
