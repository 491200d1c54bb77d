package controllers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/version"
)

// The ACL controller makes every running node of a cluster enforce the cluster's ACL file, the
// users.acl key of the {cluster}-acl Secret, which the cluster controller renders (from the
// merged bindings, the roles and the system users) and keeps up to date. Its rules, per pass:
//
//  1. Every running node is asked what it enforces: first the names of its users (ACL USERS),
//     then, unless it holds far more users than the file declares (tooManyUsers), their rules
//     (ACL LIST), normalised and compared with the file. Every reply is bounded (aclMaxReply): a
//     team whose nodes keep the default user open can set any ACL on them, and an ACL LIST of
//     40 users with 1 MiB key patterns, read whole and joined twice per node, grew the
//     operator's memory by 200-240 MB (TestACLFloodIsNotReadWhole). A node that holds too many users, or an ACL over the bound,
//     is not read whole: it is said at WARN (`node holds far more ACL than its cluster
//     declares`), with a Warning Event, and its ACL put back as below.
//  2. A node that does not enforce the file is made to: ACL LOAD (Valkey loads all of the file
//     or none of it, and keeps the connections of users that still exist), so a manual ACL
//     SETUSER or DELUSER is reverted on the next pass. Except on Valkey 8, where ACL LOAD
//     crashes a replica (8.0.1): there the users that differ are set one by one with ACL
//     SETUSER, and the extra ones deleted by name (setUsers). A node that enforces the file is
//     sent nothing more: its mounted file may be older than the Secret (below), and loading it
//     would only set it back.
//  3. After a load it is asked again (ACL LIST, bounded). A node that loaded a stale file (the
//     kubelet refreshes Secret volumes with a delay) is loaded again every second, then every
//     5 s (next), until it matches; a node that now enforces the file and did not before says so
//     (`ACL applied`).
//  4. A node that fails (unreachable, or the file refused: an unknown command in a role, say)
//     is logged at WARN, `ACL LOAD failed, will retry next tick`, with its pod (once per tick
//     and error); the others go on, and it is tried again with the catch-up delay of rule 3, so
//     a fixed file reaches it as soon as its volume has it.
//  5. A pass runs on the 30 s tick (`ACL reconcile tick`), and at once when the Secret changes
//     (a binding, role or config edit, through the cluster controller) or a pod does.
//
// It only reads Kubernetes (Events aside): the Secret is the desired state, so the two
// controllers never write the same object.

// aclMaxReply bounds every reply the ACL controller reads (valkey.Pool.MaxReply). The largest it
// asks for from a node that enforces the cluster's file is ACL LIST of that file, which lives in
// a Secret (at most 1 MiB); Valkey prints rules about as long as the file's. Twice that leaves
// room; a node holding more has had its ACL set by hand, and is put back without being read.
const aclMaxReply = 2 << 20

// tooManyUsers reports whether a node holding users users is far beyond a file that declares
// declared: more than twice as many, and 16 more. A binding change adds or drops users, and
// until its file is loaded a node holds the old file's; it never holds that many more.
func tooManyUsers(users, declared int) bool { return users > 2*declared+16 }

// While a node's mounted file is behind, it is loaded again every aclCatchUpFast for the first
// aclCatchUpFastTries passes, then every aclCatchUpSlow. The delay is the kubelet's: a few
// seconds on the local kubelet (2 s resync), up to its sync period plus its Secret cache TTL
// (about a minute) on a real one. Measured with doubling delays (1, 2, 4… s), the last node
// enforced a change 1.3 s after its file had arrived, on average; a real kubelet's minute would
// have meant up to 30 s. An ACL LOAD of an unchanged file costs the node next to nothing.
const (
	aclCatchUpFast      = time.Second
	aclCatchUpFastTries = 10
	aclCatchUpSlow      = 5 * time.Second
)

// ACLReconciler runs the ACL controller (see above) for every ValkeyCluster.
type ACLReconciler struct {
	client.Client
	// APIReader reads Secrets, which no cache holds (CacheOptions): the clusters' TLS Secrets and
	// the operator's own (through SecretsByVersion in the operator).
	APIReader client.Reader
	// Metrics, when set, counts the nodes that could not be given the ACL.
	Metrics *metrics.Registry

	ticks tickLog
	// conns keeps each node's connection across passes, apart from the cluster controller's.
	conns valkey.Pool
	// tls keeps each TLS cluster's client configuration while its Secret stays the same.
	tls tlsConfigs

	// nodeRetries: the WARN throttle per node and the catch-up delay per cluster (retries.go).
	nodeRetries

	// Dial opens every connection to a node (nil: TCP; see ValkeyClusterReconciler.Dial).
	Dial valkey.Dialer

	// Events, when set, records a Warning Event for a node whose ACL is far beyond its file.
	Events events.EventRecorder

	// Guard, shared with the cluster controller, keeps the ACL off a cluster while a disruptive
	// step of the cluster controller is in flight on it (nil: never held).
	Guard *fanout.Guard
	// PassBudget bounds one pass; zero means DefaultPassBudget.
	PassBudget time.Duration
}

// nodeACL is what one node did in a pass.
type nodeACL struct {
	pod string
	err error
	// starting: the node refused the connection within aclStartupWindow of its start (it is
	// still loading, or replaying its data): checked again soon, without a WARN.
	starting  bool
	enforcing bool // after the load, the node enforces the file
	changed   bool // and did not before it
	// unreachable: no connection could be made (refused, or no answer within DialTimeout).
	unreachable bool
	// silent: the node did not answer in time (nodeRetries.heard).
	silent bool
	// oversized: the node held far more users than the file declares (users of them; -1 when
	// not even their names could be read within aclMaxReply), or rules longer than aclMaxReply:
	// it was not read whole (rule 1).
	oversized bool
	users     int
}

// Reconcile runs one ACL pass over the cluster named by req, under the pass budget; its own
// next pass is queued as a change is (pacing.go), not below changes after a restart.
func (r *ACLReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := withBudget(ctx, r.PassBudget, func(ctx context.Context) (ctrl.Result, error) { return r.pass(ctx, req) })
	if res.RequeueAfter > 0 || err != nil {
		res.Priority = ownPriority(0)
	}
	return res, err
}

// pass is one ACL pass.
func (r *ACLReconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logging.FromContext(ctx).With(logging.ClusterName(req.Name))
	var vc v1.ValkeyCluster
	if err := r.Get(ctx, req.NamespacedName, &vc); err != nil {
		if apierrors.IsNotFound(err) {
			r.conns.Forget(req.String())
			r.tls.forget(req.String())
			r.forgetWarnings(req.String(), nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vc.DeletionTimestamp != nil {
		r.conns.Forget(req.String())
		r.tls.forget(req.String())
		r.forgetWarnings(req.String(), nil)
		return ctrl.Result{}, nil
	}
	if r.ticks.due(req.String(), time.Now()) {
		log.Info(logging.MsgACLTick)
	}
	held, release, ok := r.Guard.Push(req.String(), time.Now())
	if !ok {
		log.Debug(logging.MsgPushHeld, zap.String(logging.FieldStep, held))
		return ctrl.Result{RequeueAfter: aclCatchUpFast}, nil
	}
	defer release()
	file, creds, ok, err := r.desired(ctx, &vc)
	if err != nil || !ok {
		// Not created yet, or the credential is missing (the cluster controller says so).
		return ctrl.Result{RequeueAfter: TickInterval}, err
	}
	pods, err := listNodePods(ctx, r.Client, &vc)
	if err != nil {
		return ctrl.Result{}, err
	}
	list := corev1.PodList{Items: pods}
	if vc.Spec.TLS != nil {
		tm, problem, _, err := readTLSSecret(ctx, r.APIReader, &vc)
		if err != nil || problem != "" {
			// The cluster controller says why the Secret cannot be used; the nodes keep their ACL.
			return ctrl.Result{RequeueAfter: TickInterval}, err
		}
		creds = withTLS(&vc, creds, r.tls.get(req.String(), tm), podAddrs(list.Items))
	}
	want := acl.Normalize(file)
	now := time.Now()
	results, behind := pushToNodes(ctx, log, req.String(), list.Items, &r.nodeRetries, &r.conns, now, func(ctx context.Context, t fanout.Target) nodeACL {
		n := r.loadNode(ctx, clusterKey(&vc), t.Pod.Name, t.Addr, creds, file, want)
		n.starting = n.unreachable && fanout.StartedWithin(t.Pod, aclStartupWindow, time.Now())
		n.silent = n.err != nil && noAnswer(n.err) && ctx.Err() == nil
		return n
	}, func(pod string, err error) nodeACL { return nodeACL{pod: pod, err: err} })

	behind = r.report(log, &vc, results, len(want), now) || behind
	r.forgetWarnings(req.String(), list.Items)
	return ctrl.Result{RequeueAfter: r.next(req.String(), file, behind)}, nil
}

// report says what each node did in a pass (rules 1, 3 and 4): at WARN a node far beyond its
// file or one that failed (once per tick and error), at INFO one that now enforces the file.
// behind is true when a node must be tried again soon (starting, failed, or its file lags).
func (r *ACLReconciler) report(log *zap.Logger, vc *v1.ValkeyCluster, results []nodeACL, declared int, now time.Time) (behind bool) {
	key := clusterKey(vc)
	for _, n := range results {
		r.heard(key+"/"+n.pod, n.silent, time.Now())
		if n.oversized && r.ticks.due("oversized/"+key+"/"+n.pod, now) {
			log.Warn(logging.MsgACLNodeOversized, logging.Pod(n.pod), zap.Int(logging.FieldUsers, n.users), zap.Int(logging.FieldDeclared, declared))
			recordEvent(r.Events, vc, true, EventACLOversized, "Observe",
				"pod %s holds %s ACL users, or rules longer than %d bytes, where the cluster declares %d users: its ACL was set by hand "+
					"(its default user open?); it was not read, and the cluster's ACL was put back", n.pod, usersSeen(n.users), aclMaxReply, declared)
		}
		switch {
		case n.err != nil && n.starting:
			behind = true
			log.Debug(logging.MsgACLNodeStarting, logging.Pod(n.pod))
		case n.err != nil:
			// Tried again soon, like a node whose file lags: the Secret may already hold a fixed
			// file that the volume has not caught up with (a 9.x node waited for the tick, 30 s,
			// after a bad file was fixed). The WARN is said once per tick per node and error.
			behind = true
			r.Metrics.ACLReloadFailed(vc.Namespace, vc.Name)
			if !r.warnDue(key+"/"+n.pod, n.err.Error(), time.Now()) {
				continue
			}
			log.Warn(logging.MsgACLLoadFailed, logging.Pod(n.pod), zap.String(logging.FieldError, acl.ScrubHashes(n.err.Error())))
		case n.changed:
			log.Info(logging.MsgACLApplied, logging.Pod(n.pod))
		case !n.enforcing:
			behind = true
			log.Debug(logging.MsgACLFileBehind, logging.Pod(n.pod))
		}
	}
	return behind
}

// desired reads the cluster's ACL file and the operator's credentials from the cache. ok is
// false while either does not exist, or is not controlled by the cluster (ownership.go: the
// cluster controller makes it Invalid; neither is used), or while the file would not let the
// operator back in (acl.KeepsOperator).
func (r *ACLReconciler) desired(ctx context.Context, vc *v1.ValkeyCluster) (file string, creds valkey.Credentials, ok bool, err error) {
	secret, ok, err := ownedSecret(ctx, r.APIReader, vc, resources.ACLSecretName(vc))
	if err != nil || !ok {
		return "", creds, false, err
	}
	cred, ok, err := ownedSecret(ctx, r.APIReader, vc, resources.CredentialSecretName(vc))
	if err != nil || !ok {
		return "", creds, false, err
	}
	file = string(secret.Data[resources.ACLFileName])
	if file == "" {
		return "", creds, false, nil
	}
	// The password the file lets in: the current one, or while a rotation retires it, the
	// next one (rotation.go).
	pw := operatorPasswordFor(file, cred.Data)
	if pw == "" {
		// Not a file the cluster controller rendered: someone rewrote the Secret. Applied, it
		// would lock the operator out of every node; the cluster controller puts the file back,
		// and the Secret's change brings the next pass.
		return "", creds, false, nil
	}
	return file, valkey.Credentials{Username: acl.OperatorUser, Password: pw}, true, nil
}

// aclStartupWindow is how long after its container started a node that refuses connections
// is taken to be starting rather than failing. Measured: under load a new node's first passes
// came within fanout.StartGrace and were refused, a WARN per pod on every routine roll.
const aclStartupWindow = time.Minute

// usersSeen is a node's user count as the Event says it.
func usersSeen(n int) string {
	if n < 0 {
		return "more"
	}
	return strconv.Itoa(n)
}

// loadNode makes one node enforce the ACL file (rules 1 to 3): what it enforces is compared
// with want (acl.Normalize of the file), and only a node that differs is loaded and asked again.
func (r *ACLReconciler) loadNode(ctx context.Context, cluster, pod, addr string, creds valkey.Credentials, file string, want map[string]string) nodeACL {
	n := nodeACL{pod: pod}
	c, err := r.conns.Client(cluster, addr, creds)
	if err != nil {
		n.err, n.unreachable = err, true
		return n
	}
	names, err := c.ACLUsers(ctx)
	if err != nil && valkey.ClosedByNode(err) && ctx.Err() == nil {
		// The node closed the pooled connection while it sat idle between passes (its
		// `timeout`, or its container restarted): one more try dials afresh, as an observation
		// does (valkey.Pool.Observe). A node that is down fails it at once as well.
		rctx, cancel := context.WithTimeout(ctx, valkey.RedialWithin)
		names, err = c.ACLUsers(rctx)
		cancel()
	}
	switch {
	case valkey.IsReplyRefused(err):
		n.oversized, n.users, names = true, -1, nil
	case valkey.IsServerError(err):
		// A node that still enforces a file from before the operator's user was granted ACL
		// USERS (an operator upgrade): its names are not known, and ACL LIST, bounded, says
		// what it enforces; the file loaded then grants it.
		names = nil
	case err != nil:
		n.err = err
		return n
	}
	info, err := c.Info(ctx, "server")
	if err != nil {
		n.err = err
		return n
	}
	safe := version.Parse(info["valkey_version"]).SafeACLLoad()
	if !safe {
		file = acl.WithSetUsers(acl.ForValkey8(file))
		want = acl.Normalize(file)
	}
	// What the node enforces, read once, and only when it is not far beyond the file: nil when
	// not read.
	var have map[string]string
	if !n.oversized && tooManyUsers(len(names), len(want)) {
		n.oversized, n.users = true, len(names)
	}
	if !n.oversized {
		list, err := c.ACLList(ctx)
		switch {
		case valkey.IsReplyRefused(err):
			n.oversized, n.users = true, len(names)
		case err != nil:
			n.err = err
			return n
		default:
			have = acl.Normalize(strings.Join(list, "\n"))
		}
	}
	if have != nil && maps.Equal(have, want) {
		n.enforcing = true
		return n
	}
	if safe {
		n.err = c.ACLLoad(ctx)
	} else {
		n.err = setUsers(ctx, c, file, have, names)
	}
	if n.err != nil {
		return n
	}
	after, err := c.ACLList(ctx)
	if err != nil {
		n.err = err
		return n
	}
	n.enforcing = maps.Equal(acl.Normalize(strings.Join(after, "\n")), want)
	n.changed = n.enforcing
	return n
}

// setUsers makes a node whose ACL LOAD is unsafe (version.Valkey.SafeACLLoad) enforce file: ACL
// SETUSER name reset <rules> for every user whose rules differ from what the node has (have; every
// user of the file when have is nil: not read), the operator's own last, then ACL DELUSER for
// every user the node holds (names, and have's) that the file does not name. It applies what the
// operator rendered, not the node's mounted file, so there is no file to catch up with.
//
// A user the node refuses (an unknown command in a role, say) does not stop the others: stopping
// there left the default user open behind a half-applied file (found by a break test). The
// refused ones are returned together.
func setUsers(ctx context.Context, c *valkey.Client, file string, have map[string]string, names []string) error {
	want := acl.Normalize(file)
	var errs []error
	for _, l := range acl.Lines(file) {
		if rules, ok := have[l.Name]; ok && rules == want[l.Name] {
			continue
		}
		if err := c.ACLSetUser(ctx, l.Name, append([]string{"reset"}, l.Rules...)); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	extra := map[string]bool{}
	for _, name := range names {
		extra[name] = true
	}
	for name := range have {
		extra[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if _, ok := want[name]; !ok && name != "default" {
			if err := c.ACLDelUser(ctx, name); err != nil {
				if ctx.Err() != nil {
					return err
				}
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// SetupWithManager registers the ACL controller: a pass per cluster on its tick, when its ACL
// or credential Secret changes (both owned by the cluster), and when one of its pods changes (a
// node that started with an older file). log is the operator's root logger.
func (r *ACLReconciler) SetupWithManager(mgr ctrl.Manager, log *zap.Logger) error {
	r.conns.Dial = r.Dial
	r.conns.MaxReply = aclMaxReply
	t := logging.NewTracker(v1.GroupVersion.WithKind("ValkeyCluster"), mgr.GetScheme())
	return ctrl.NewControllerManagedBy(mgr).
		Named("valkeycluster-acl").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles, RateLimiter: newBackoff()}).
		Watches(&v1.ValkeyCluster{}, t.Primary(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(&corev1.Secret{}, t.Owned(&v1.ValkeyCluster{}, mgr.GetRESTMapper())).
		Watches(&corev1.Pod{}, t.Related(handler.EnqueueRequestsFromMapFunc(clusterOf))).
		Complete(t.Reconciler(logging.Target(log, logging.TargetACL), r))
}
