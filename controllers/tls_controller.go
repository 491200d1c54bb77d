package controllers

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
)

// The TLS controller makes every running node of a TLS cluster serve the certificate of the
// cluster's Secret, without a restart (concepts/architecture.md, the TLS controller). Clusters
// without TLS are skipped. Its rules, per pass:
//
//  1. The Secret is validated as the cluster controller does; while it fails, nothing is touched
//     (the cluster controller reports it): the nodes keep the certificate they have.
//  2. Each running node is asked, by a TLS handshake, which certificate it serves. One that
//     serves another than tls.crt is pointed at its certificate files again (CONFIG SET of the
//     three tls-*-file paths, which Valkey re-reads even when the paths are unchanged), then
//     asked again: serving tls.crt now, it says so (`TLS certificate reloaded`); still serving
//     the old one, its mounted volume lags behind the Secret, and it is reloaded again every
//     second, then every 5 s (as the ACL controller's catch-up), until it serves the new one.
//  3. On the 30 s tick (`TLS reconcile tick`) every node is pointed at its files again whatever
//     it serves, as the original does: a change of ca.crt alone shows in no handshake.
//  4. A node that cannot be reached or refuses the reload is logged at WARN, `TLS reload
//     failed, will retry next tick` (once per tick and error), and tried again with rule 2's
//     delay; the others go on.
//  5. On the tick, a leaf or CA of the Secret that expires within tlsmaterial.ExpiryWarning (or has
//     expired) is logged at WARN, `TLS certificate expires soon`; the cluster controller sets
//     the CertificateExpiring condition from the same check. Expiry never makes a cluster
//     Invalid.
//
// It only reads Kubernetes. A pass runs on the tick, and at once when the cluster, its pods, or
// a Secret it names change.

// tlsHandshakeTimeout bounds the handshake that reads the certificate a node serves.
const tlsHandshakeTimeout = 2 * time.Second

// TLSReconciler runs the TLS controller (see above) for every TLS ValkeyCluster.
type TLSReconciler struct {
	client.Client
	// APIReader reads Secrets, which no cache holds (CacheOptions): the clusters' TLS Secrets and
	// the operator's own (through SecretsByVersion in the operator).
	APIReader client.Reader
	// Metrics, when set, counts the nodes that could not reload; Events, when set, records a
	// certificate about to expire on the cluster.
	Metrics *metrics.Registry
	Events  events.EventRecorder

	ticks   tickLog
	expires tickLog
	// conns keeps each node's connection across passes, apart from the other controllers'.
	conns valkey.Pool
	tls   tlsConfigs

	nodeRetries
	// Dial opens every connection to a node (nil: TCP; see ValkeyClusterReconciler.Dial).
	Dial valkey.Dialer
	// Guard, shared with the cluster controller, keeps reloads off a cluster while a disruptive
	// step of the cluster controller is in flight on it (nil: never held).
	Guard *fanout.Guard

	// PassBudget bounds one pass; zero means DefaultPassBudget.
	PassBudget time.Duration

	// rotations carries a cluster whose TLS Secret changed (SecretSeen) to a pass of its own.
	rotations chan event.GenericEvent
	seenMu    sync.Mutex
	seen      map[types.NamespacedName]string
	// owed: the clusters whose tick came while their pushes were held (fanout.Guard); their next
	// pass reloads every node, as the tick's would have.
	owed map[string]bool
}

// oweReload records that cluster's tick reload was held back.
func (r *TLSReconciler) oweReload(cluster string) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.owed == nil {
		r.owed = map[string]bool{}
	}
	r.owed[cluster] = true
}

// reloadOwed reports, and forgets, whether cluster's tick reload was held back.
func (r *TLSReconciler) reloadOwed(cluster string) bool {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	owed := r.owed[cluster]
	delete(r.owed, cluster)
	return owed
}

// SecretSeen is told, by the cluster controller's passes (every few seconds per cluster), the
// resourceVersion of a TLS cluster's Secret. A change from the one seen before starts a pass of
// this controller at once: no watch follows a Secret the operator does not create (only the
// operator's own objects are cached), and the rotation must not wait for the tick.
func (r *TLSReconciler) SecretSeen(cluster types.NamespacedName, resourceVersion string) {
	r.seenMu.Lock()
	if r.seen == nil {
		r.seen = map[types.NamespacedName]string{}
	}
	prev, known := r.seen[cluster]
	r.seen[cluster] = resourceVersion
	r.seenMu.Unlock()
	if !known || prev == resourceVersion || r.rotations == nil {
		return
	}
	vc := &v1.ValkeyCluster{}
	vc.Namespace, vc.Name = cluster.Namespace, cluster.Name
	select {
	case r.rotations <- event.GenericEvent{Object: vc}:
	default: // a burst of rotations: the tick catches up
	}
}

// nodeTLS is what one node did in a pass.
type nodeTLS struct {
	pod      string
	err      error
	reloaded bool // it served another certificate, and serves the Secret's after the reload
	behind   bool // it still serves another certificate after the reload
	silent   bool // it did not answer in time (nodeRetries.heard)
}

// Reconcile runs one TLS pass over the cluster named by req, under the pass budget; its own
// next pass is queued as a change is (pacing.go), not below changes after a restart.
func (r *TLSReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := withBudget(ctx, r.PassBudget, func(ctx context.Context) (ctrl.Result, error) { return r.pass(ctx, req) })
	if res.RequeueAfter > 0 || err != nil {
		res.Priority = ownPriority(0)
	}
	return res, err
}

// pass is one TLS pass.
func (r *TLSReconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logging.FromContext(ctx).With(logging.ClusterName(req.Name))
	var vc v1.ValkeyCluster
	if err := r.Get(ctx, req.NamespacedName, &vc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vc.DeletionTimestamp != nil || vc.Spec.TLS == nil {
		r.forget(req.String())
		return ctrl.Result{}, nil
	}
	now := time.Now()
	tick := r.ticks.due(req.String(), now)
	if tick {
		log.Info(logging.MsgTLSTick)
	}
	tm, problem, _, err := readTLSSecret(ctx, r.APIReader, &vc)
	if err != nil || problem != "" {
		return ctrl.Result{RequeueAfter: TickInterval}, err
	}
	if r.expires.due(req.String(), now) {
		r.warnExpiring(log, &vc, tm, now)
	}
	// After the expiry check: a held rotation still warns of a certificate about to expire.
	held, release, ok := r.Guard.Push(req.String(), now)
	if !ok {
		if tick {
			r.oweReload(req.String()) // the tick's reload of every node (rule 3) is not lost
		}
		log.Debug(logging.MsgPushHeld, zap.String(logging.FieldStep, held))
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	defer release()
	tick = r.reloadOwed(req.String()) || tick
	creds, ok, err := r.credentials(ctx, &vc)
	if err != nil || !ok {
		return ctrl.Result{RequeueAfter: TickInterval}, err
	}
	pods, err := listNodePods(ctx, r.Client, &vc)
	if err != nil {
		return ctrl.Result{}, err
	}
	list := corev1.PodList{Items: pods}
	creds = withTLS(&vc, creds, r.tls.get(req.String(), tm), podAddrs(list.Items))

	results, behind := pushToNodes(ctx, log, req.String(), list.Items, &r.nodeRetries, &r.conns, now, func(ctx context.Context, t fanout.Target) nodeTLS {
		n := r.reloadNode(ctx, req.String(), t.Pod.Name, t.Addr, resources.TLSFileParams(t.Pod), creds, tm.Fingerprint(), tick)
		n.silent = n.err != nil && noAnswer(n.err) && ctx.Err() == nil
		return n
	}, func(pod string, err error) nodeTLS { return nodeTLS{pod: pod, err: err} })
	for _, n := range results {
		r.heard(req.String()+"/"+n.pod, n.silent, time.Now())
		switch {
		case n.err != nil:
			behind = true
			r.Metrics.TLSReloadFailed(vc.Namespace, vc.Name)
			if r.warnDue(req.String()+"/"+n.pod, n.err.Error(), now) {
				log.Warn(logging.MsgTLSReloadFailed, logging.Pod(n.pod), logging.Err(n.err))
			}
		case n.behind:
			behind = true
			log.Debug(logging.MsgTLSFilesBehind, logging.Pod(n.pod))
		case n.reloaded:
			log.Info(logging.MsgTLSReloaded, logging.Pod(n.pod))
		}
	}
	return ctrl.Result{RequeueAfter: r.next(req.String(), tm.Digest, behind)}, nil
}

// reloadNode makes one node serve the certificate whose fingerprint is want (rules 2 and 3).
func (r *TLSReconciler) reloadNode(ctx context.Context, cluster, pod, addr string, files map[string]string, creds valkey.Credentials, want string, always bool) nodeTLS {
	n := nodeTLS{pod: pod}
	before, err := servedFingerprint(ctx, r.conns.Dial, addr, creds.ServerName(addr))
	if err != nil {
		n.err = err
		return n
	}
	if before == want && !always {
		return n
	}
	c, err := r.conns.Client(cluster, addr, creds)
	if err != nil {
		n.err = err
		return n
	}
	n.err = c.ConfigSet(ctx, files)
	if n.err != nil && valkey.ClosedByNode(n.err) && ctx.Err() == nil {
		// The pooled connection was closed by the node while idle (see ACLReconciler.loadNode).
		rctx, cancel := context.WithTimeout(ctx, valkey.RedialWithin)
		n.err = c.ConfigSet(rctx, files)
		cancel()
	}
	if n.err != nil {
		return n
	}
	after, err := servedFingerprint(ctx, r.conns.Dial, addr, creds.ServerName(addr))
	if err != nil {
		n.err = err
		return n
	}
	n.behind = after != want
	n.reloaded = !n.behind && before != want
	return n
}

// servedFingerprint is the fingerprint of the certificate the node at addr serves to a new
// connection. The handshake does not verify it: it is compared, byte for byte through its
// digest, with the Secret's, which is stronger than verification; and a node that still serves
// an old certificate must be readable to be reloaded. Nothing is sent over the connection. dial
// is the reconciler's Dialer (nil: TCP).
func servedFingerprint(ctx context.Context, dial valkey.Dialer, addr, serverName string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	cfg := &tls.Config{
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the certificate is compared with the Secret's by fingerprint, not trusted
	}
	if dial == nil {
		d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
		dial = func(ctx context.Context, addr string, _ *tls.Config) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	conn, err := dial(ctx, addr, cfg)
	if err != nil {
		return "", fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return "", fmt.Errorf("tls handshake with %s: not a TLS connection", addr)
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", fmt.Errorf("tls handshake with %s: no certificate served", addr)
	}
	return tlsmaterial.Fingerprint(certs[0].Raw), nil
}

// warnExpiring says, at WARN and as a Warning Event, each certificate of tm about to expire.
func (r *TLSReconciler) warnExpiring(log *zap.Logger, vc *v1.ValkeyCluster, tm *tlsmaterial.Material, now time.Time) {
	for _, e := range tlsmaterial.Expiring(tm, now) {
		recordEvent(r.Events, vc, true, EventCertExpiring, "Observe", "TLS Secret %q: %s (%s) expires at %s", vc.Spec.TLS.SecretRef, e.Key, e.Subject,
			e.NotAfter.UTC().Format(time.RFC3339))
		log.Warn(logging.MsgTLSExpiring, zap.String(logging.FieldSecret, vc.Spec.TLS.SecretRef), zap.String(logging.FieldKey, e.Key),
			zap.String(logging.FieldNotAfter, e.NotAfter.UTC().Format(time.RFC3339)))
	}
}

// credentials reads the operator's credentials for vc from the cache; ok is false while the
// Secret does not exist (the cluster controller creates it, or says it is missing).
func (r *TLSReconciler) credentials(ctx context.Context, vc *v1.ValkeyCluster) (valkey.Credentials, bool, error) {
	s, ok, err := ownedSecret(ctx, r.APIReader, vc, resources.CredentialSecretName(vc))
	if err != nil || !ok {
		return valkey.Credentials{}, false, err
	}
	// The password of the rotation phase the cluster's status records (rotation.go).
	pw := resources.ForPhase(rotationPhase(vc), s.Data).Use.Operator
	return valkey.Credentials{Username: acl.OperatorUser, Password: pw}, pw != "", nil
}

// forget drops what the controller keeps of a cluster.
func (r *TLSReconciler) forget(key string) {
	r.conns.Forget(key)
	r.tls.forget(key)
	r.reloadOwed(key)
	r.forgetCluster(key)
}

// SetupWithManager registers the TLS controller: a pass per cluster on its tick, when the
// cluster or one of its pods changes, and when the Secret a cluster names as tls.secretRef
// changes (SecretSeen: the start of a rotation). log is the operator's root logger.
func (r *TLSReconciler) SetupWithManager(mgr ctrl.Manager, log *zap.Logger) error {
	r.conns.Dial = r.Dial
	t := logging.NewTracker(v1.GroupVersion.WithKind("ValkeyCluster"), mgr.GetScheme())
	r.rotations = make(chan event.GenericEvent, 1024)
	itself := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("valkeycluster-tls").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles, RateLimiter: newBackoff()}).
		Watches(&v1.ValkeyCluster{}, t.Primary(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.rotations, t.Related(itself))).
		Watches(&corev1.Pod{}, t.Related(handler.EnqueueRequestsFromMapFunc(clusterOf))).
		Complete(t.Reconciler(logging.Target(log, logging.TargetTLS), r))
}
