package v1alpha1_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// One real kube-apiserver (with etcd) for the whole package, started by the first test that
// asks for it and stopped by TestMain. The pure unit tests never start it.
var (
	envOnce   sync.Once
	testEnv   *envtest.Environment
	envClient client.Client
	envErr    error
)

// controlPlaneBinaries are what envtest runs from KUBEBUILDER_ASSETS.
var controlPlaneBinaries = []string{"etcd", "kube-apiserver"}

func TestMain(m *testing.M) {
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// apiServer returns a client of a real kube-apiserver on which the CRDs of manifests/crds are
// installed. A missing control plane is a failure, not a skip: these tests are the evidence
// that the CRDs refuse what they should, and a silently skipped run proves nothing.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real kube-apiserver (envtest); not run with -short")
	}
	envOnce.Do(func() { envClient, envErr = startAPIServer() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return envClient
}

func startAPIServer() (client.Client, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: these tests need etcd and kube-apiserver; " +
			"run `make control-plane` and then the tests through make (`make test`), which points " +
			"KUBEBUILDER_ASSETS at the built binaries")
	}
	for _, bin := range controlPlaneBinaries {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s (%w): run `make control-plane` to build it", assets, bin, err)
		}
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "manifests", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// make test runs several control planes at once on 2 cores; the default 20 s start
		// timeout failed there (kube-apiserver at load 40).
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest control plane from %s: %w", assets, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("add client-go scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("add v1alpha1 scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	return c, nil
}
