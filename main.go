// Command valkey-operator runs the ValkeyCluster operator: a controller-runtime manager with
// leader election that reconciles ValkeyCluster objects into running Valkey clusters.
//
// Logging follows the original operator's contract (see package logging): JSON lines on
// stdout, verbosity from RUST_LOG read once here. One deliberate difference: with RUST_LOG
// unset or empty the original prints nothing at all; this operator logs at `error` then, so a
// broken operator always says why.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/controllers"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
)

const (
	// defaultNamespace is where the operator runs and keeps its leader lease, unless
	// POD_NAMESPACE says otherwise (the Deployment sets it from the downward API).
	defaultNamespace = "valkey-operator"
	// zoneSpreadEnv is the operator-wide default of placement.zoneSpread, read once at
	// startup. The Deployment wires it from key defaultZoneSpread of ConfigMap
	// valkey-operator-config, marked optional (reference/operator-configuration.md).
	zoneSpreadEnv = "DEFAULT_ZONE_SPREAD"
	// networkPolicyEnv is the operator-wide default of spec.network.policy, read once at
	// startup. The Deployment wires it from key defaultNetworkPolicy of ConfigMap
	// valkey-operator-config, marked optional.
	networkPolicyEnv = "DEFAULT_NETWORK_POLICY"
	// leaderElectionID names the Lease that keeps one replica active at a time.
	leaderElectionID = "valkey-operator.valkey.gomomento.com"
)

func main() {
	os.Exit(run())
}

func run() int {
	leaderElect := flag.Bool("leader-elect", true, "run only while holding the leader lease (one active replica at a time)")
	metricsAddr := flag.String("metrics-bind-address", ":8443", "serve the Prometheus metrics over HTTPS on this address, to callers Kubernetes authenticates and authorizes (get on /metrics); 0 turns the endpoint off")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "serve /healthz and /readyz on this address; 0 turns them off")
	// Off unless asked for: the profiles name clusters, pods and addresses, so the endpoint is
	// for a developer (the benchmarks profile the operator through it), bound to loopback.
	pprofAddr := flag.String("pprof-bind-address", "", "serve Go's /debug/pprof on this address (e.g. 127.0.0.1:6060), without authentication; empty turns it off")
	flag.Parse()

	rustLog := os.Getenv("RUST_LOG")
	if rustLog == "" {
		rustLog = "error"
	}
	log := logging.New(os.Stdout, os.Stderr, rustLog, nil)
	defer func() { _ = log.Sync() }()
	zap.ReplaceGlobals(log)
	logging.SetupLibraryLogging(log)
	opLog := logging.Target(log, logging.TargetOperator)

	// Invalid configuration fails before anything else: a misconfigured operator does not
	// start, rather than running with a guessed default.
	spread, err := parseZoneSpread(os.Getenv(zoneSpreadEnv))
	if err != nil {
		logging.InvalidConfig(log, zoneSpreadEnv, string(spread), err)
		return 1
	}

	netpol, err := parseNetworkPolicy(os.Getenv(networkPolicyEnv))
	if err != nil {
		logging.InvalidConfig(log, networkPolicyEnv, string(netpol), err)
		return 1
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return logging.ClientBuildFailed(os.Stderr, err)
	}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = defaultNamespace
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)

	lock, err := leaderLock(cfg, namespace)
	if err != nil {
		return logging.ClientBuildFailed(os.Stderr, err)
	}
	// The metrics endpoint authenticates every scrape with a TokenReview and authorizes it with a
	// SubjectAccessReview (get on the non-resource URL /metrics), as kubebuilder projects do: the
	// per-node figures are the teams' (memory, clients, keyspace), not the world's. Tokens not
	// known to pass are reviewed within a budget (metrics.AuthFilter): a flood of made-up tokens
	// must not hold up the operator's own requests, its lease renewals among them.
	metricsOpts := metricsserver.Options{BindAddress: *metricsAddr, SecureServing: true, FilterProvider: metrics.AuthFilter}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              scheme,
		Cache:                               controllers.CacheOptions(),
		Client:                              controllers.ClientOptions(),
		LeaderElection:                      *leaderElect,
		LeaderElectionID:                    leaderElectionID,
		LeaderElectionNamespace:             namespace,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		Metrics:                             metricsOpts,
		HealthProbeBindAddress:              *probeAddr,
		PprofBindAddress:                    *pprofAddr,
	})
	if err != nil {
		return logging.ClientBuildFailed(os.Stderr, err)
	}
	if err := controllers.IndexCaches(context.Background(), mgr.GetFieldIndexer()); err != nil {
		opLog.Error("controller setup failed", logging.Err(err))
		return 1
	}
	reg := metrics.New()
	ctrlmetrics.Registry.MustRegister(reg)
	if err := addProbes(mgr); err != nil {
		opLog.Error("controller setup failed", logging.Err(err))
		return 1
	}
	recorder := mgr.GetEventRecorder(controllers.EventRecorderName)
	apiReader := controllers.SecretsByVersion(mgr.GetAPIReader(), mgr.GetCache())
	// One guard: the ACL and TLS controllers keep off a cluster while the cluster controller's
	// disruptive step on it is in flight.
	guard := &fanout.Guard{}
	tlsr := &controllers.TLSReconciler{Client: mgr.GetClient(), APIReader: apiReader, Metrics: reg, Events: recorder, Guard: guard}
	if err := tlsr.SetupWithManager(mgr, log); err != nil {
		opLog.Error("controller setup failed", logging.Err(err))
		return 1
	}
	r := &controllers.ValkeyClusterReconciler{Client: mgr.GetClient(), APIReader: apiReader, DefaultZoneSpread: spread, DefaultNetworkPolicy: netpol, OperatorNamespace: namespace, TLSSecretSeen: tlsr.SecretSeen,
		Metrics: reg, Events: recorder, Guard: guard}
	if err := r.SetupWithManager(mgr, log); err != nil {
		opLog.Error("controller setup failed", logging.Err(err))
		return 1
	}
	acl := &controllers.ACLReconciler{Client: mgr.GetClient(), APIReader: apiReader, Metrics: reg, Events: recorder, Guard: guard}
	if err := acl.SetupWithManager(mgr, log); err != nil {
		opLog.Error("controller setup failed", logging.Err(err))
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		opLog.Error("manager stopped", logging.Err(err))
		return 1
	}
	return 0
}

// addProbes serves /healthz (the process answers) and /readyz: ready once the manager's caches
// have synced, whether this replica leads or waits for the lease (a replica that lost the lease
// exits). Ready before the caches sync, a rollout would retire the old operator before the new
// one could act.
func addProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	})
}

// leaderLock is the Lease the replicas compete for. It is built here, rather than by
// controller-runtime, only to give it no event recorder: client-go's Lease lock records a
// "became leader" Event through the recorder it is given, which says nothing a platform team
// needs (the log and the Lease itself do), and is one more writer on the events API.
func leaderLock(cfg *rest.Config, namespace string) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("hostname: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "valkey-operator-leader-election"))
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, leaderElectionID,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: leaderIdentity(os.Getenv("POD_NAME"), host)})
}

// leaderIdentity is the name the lease holder goes by: the pod's name (POD_NAME, which the
// Deployment sets from the downward API) when there is one, so that an operator container the
// kubelet restarts in its pod (a crash, an OOM kill) takes the lease back at once, instead of
// waiting out the lease of the process that died (15 s, controller-runtime's LeaseDuration)
// while no operator heals anything: the chaos suite's kill-operator met a lost majority in
// that window (seed 60606, +14:00) and the TAKEOVER came 21 s after the kill. A pod runs one
// operator container and the kubelet starts it again only once the last one exited, so two live
// processes never share a pod's name. Without POD_NAME (the binary run by hand, or several on one
// host), the host name and a new UUID, as controller-runtime does.
func leaderIdentity(pod, host string) string {
	if pod != "" {
		return pod
	}
	return host + "_" + string(uuid.NewUUID())
}

// parseZoneSpread reads the value of DEFAULT_ZONE_SPREAD: unset or empty (no ConfigMap, or
// no key in it) means bestEffort; bestEffort and required, spelled exactly as in
// placement.zoneSpread, are themselves; anything else is an error (the returned value is what
// was read).
func parseZoneSpread(value string) (v1.ZoneSpread, error) {
	if value == "" {
		return v1.ZoneSpreadBestEffort, nil
	}
	if z := v1.ZoneSpread(value); z.IsValid() {
		return z, nil
	}
	return v1.ZoneSpread(value), fmt.Errorf("%s (key defaultZoneSpread of ConfigMap valkey-operator-config) must be %q or %q; fix the ConfigMap and restart the operator",
		zoneSpreadEnv, v1.ZoneSpreadBestEffort, v1.ZoneSpreadRequired)
}

// parseNetworkPolicy reads the value of DEFAULT_NETWORK_POLICY: unset or empty (no ConfigMap, or
// no key in it) means Enabled; Enabled and Disabled, spelled exactly as in spec.network.policy,
// are themselves; anything else is an error (the returned value is what was read).
func parseNetworkPolicy(value string) (v1.NetworkPolicyMode, error) {
	if value == "" {
		return v1.NetworkPolicyEnabled, nil
	}
	if m := v1.NetworkPolicyMode(value); m.IsValid() {
		return m, nil
	}
	return v1.NetworkPolicyMode(value), fmt.Errorf("%s (key defaultNetworkPolicy of ConfigMap valkey-operator-config) must be %q or %q; fix the ConfigMap and restart the operator",
		networkPolicyEnv, v1.NetworkPolicyEnabled, v1.NetworkPolicyDisabled)
}
