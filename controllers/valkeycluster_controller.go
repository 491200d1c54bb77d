// Package controllers holds the reconcilers: all of the operator's I/O against the Kubernetes
// API and the Valkey nodes. The decisions are made by package fsm, from one observed snapshot
// per reconcile, and by package plan, which turns it into the pass's actions.
package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fanout"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/version"
)

// Requeue intervals.
const (
	// TickInterval is the steady re-reconcile of every cluster (the `active tick` heartbeat).
	TickInterval = 30 * time.Second
	// waitInterval is how soon a pass that waits on the world (pods starting, gossip
	// converging) looks again.
	waitInterval = time.Second
	// promotedInterval is how soon the pass after the promotion of a lost primary's replica
	// looks: it forgets the lost primary's id (plan/dead.go), which clients reading CLUSTER
	// SHARDS may still send the shard's writes to.
	promotedInterval = 100 * time.Millisecond
	// healthyInterval is how often a Ready cluster with nothing to do is observed again. Nothing
	// in Kubernetes changes when a node stops answering while its pod runs (a network cut, a
	// partition, a hung host), so no watch reports it: the operator learns of it only by
	// looking. Valkey heals the loss of a minority of primaries by itself, but when the slot
	// holders lose their majority only the operator's TAKEOVER ends the outage, and waiting for
	// the tick left every slot refusing writes for up to 30 s more (chaos seed 20261201: a 15 s
	// cut of two of three primaries ended before the operator looked at all). The interval is
	// cluster-node-timeout: the reachable nodes flag a silent one no sooner, and the quorum
	// planner judges a primary gone from their flags. The heartbeat lines keep their 30 s
	// rhythm (tickLog), and a pass that changes nothing writes nothing.
	healthyInterval = resources.ClusterNodeTimeoutMS * time.Millisecond
)

// ValkeyClusterReconciler reconciles ValkeyCluster objects: it creates the cluster's Service,
// config objects and pods, forms the Valkey cluster and heals it.
type ValkeyClusterReconciler struct {
	client.Client
	// APIReader reads without the cache: the cluster itself, lists that must see the pass's own
	// writes, and Secrets (in the operator through SecretsByVersion, which keeps a copy of the
	// operator's own Secrets while their resourceVersion stays).
	APIReader client.Reader
	// DefaultZoneSpread is DEFAULT_ZONE_SPREAD (the operator ConfigMap's defaultZoneSpread).
	DefaultZoneSpread v1.ZoneSpread
	// DefaultNetworkPolicy is DEFAULT_NETWORK_POLICY (the operator ConfigMap's
	// defaultNetworkPolicy): whether a cluster whose spec.network.policy is unset keeps its
	// NetworkPolicy ("" means Enabled).
	DefaultNetworkPolicy v1.NetworkPolicyMode
	// OperatorNamespace is the namespace of the operator's pods (POD_NAMESPACE), which every
	// cluster's NetworkPolicy lets reach the client port; "" means DefaultOperatorNamespace.
	OperatorNamespace string
	// PassBudget bounds one pass; zero means DefaultPassBudget.
	PassBudget time.Duration

	ticks tickLog
	// conns keeps each node's Valkey connection open across passes (see connections.go).
	conns valkey.Pool
	// clusterMemory is what the controller keeps of each cluster between passes (memory.go).
	clusterMemory
	// changes says when a watch last enqueued a cluster (look.go).
	changes changeTracker
	// backoff is the controller's rate limiter (pacing.go; nil in unit tests).
	backoff *backoff
	// Metrics, when set, is given every pass's observation and actions (package metrics);
	// Events, when set, records Kubernetes Events on the cluster (observability.go).
	Metrics *metrics.Registry
	Events  events.EventRecorder
	// TLSSecretSeen, when set, is told the resourceVersion of each TLS cluster's Secret as a pass
	// reads it (the TLS controller starts a rotation from a change: no watch follows Secrets the
	// operator does not create).
	TLSSecretSeen func(cluster types.NamespacedName, resourceVersion string)
	// Dial opens every connection to a node (nil: TCP); the seam a unit test or a simulated
	// fleet puts its nodes behind (valkey.Dialer). Read once, by SetupWithManager.
	Dial valkey.Dialer
	// Guard, shared with the ACL and TLS controllers, records the disruptive step a pass carries
	// out on a cluster, so that they keep off its nodes until a later pass has observed the
	// step's effect (nil: nothing recorded).
	Guard *fanout.Guard
}

// Least privilege: exactly the calls the operator makes (tests/install compares these grants with
// the API server's audit log of an install). What it reads from its caches needs list and watch,
// not get: ValkeyNodes, configs, images and roles are never read one by one from the API server. It never writes a cluster's spec
// (status only, by merge patch); of a ValkeyNode it writes only spec.lifecycle (and the
// join-type label), and it deletes ValkeyNodes, never what owner references delete (their pods
// and ConfigMaps, the cluster's Service and Secrets). It creates per-node ConfigMaps once,
// updates only the Secrets it renders, patches a Service an older operator created to the
// original's port names and selector, competes for one Lease (get / create / update, in its own
// namespace only: a Role, not the ClusterRole; the chart binds it in the release namespace), and gets
// a cluster's Namespace to leave alone the clusters of one being deleted (get only: no
// namespace informer). It keeps one PodDisruptionBudget per shard (list / watch; create, patch
// its spec to the built one, delete a removed shard's), one NetworkPolicy per cluster (get, by
// name, when the cache has none; list / watch; create, patch its spec and labels to the built
// ones, delete it when turned off), and patches pods only to bring
// spec.podAnnotations onto them (metadata.annotations, by merge patch). It records Events
// (events.k8s.io: create, and patch for a series), and checks each scrape of its metrics endpoint
// with a TokenReview and a SubjectAccessReview.
// +kubebuilder:rbac:groups=valkey.gomomento.com,resources=valkeyclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=valkey.gomomento.com,resources=valkeyclusters/status,verbs=patch
// +kubebuilder:rbac:groups=valkey.gomomento.com,resources=valkeynodes,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups=valkey.gomomento.com,resources=valkeynodes/status,verbs=patch
// +kubebuilder:rbac:groups=valkey.gomomento.com,resources=valkeyconfigs;valkeyimages;valkeyroles,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=valkey-operator
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// requeueAfter says when the next pass looks again. A pass that promoted a lost primary's replica
// is followed at once (promotedInterval). A pass that acted, or a cluster that is not
// Ready while the operator can still get it there (pods starting, nodes meeting, replicas
// syncing), is looked at again after waitInterval, so that Ready is reported within a second of
// becoming true. A Ready cluster with nothing to do is looked at every healthyInterval: the loss
// of a node that no watch reports must not wait for the tick. One that waits on a change outside
// the operator (which the watches report) is looked at on the tick.
func requeueAfter(h health, pl plan.Plan) time.Duration {
	switch {
	case slices.ContainsFunc(pl.Actions, promotesLost):
		return promotedInterval
	case changesCluster(pl) || (!h.Ready && !h.Outside):
		return waitInterval
	case h.Ready:
		return healthyInterval
	}
	return TickInterval
}

// changesCluster reports whether pl has a step beside its bookkeeping (plan.Upkeep). Bookkeeping
// alone (a budget, an annotation, a node marked Active) brings the next look no sooner: one that
// something outside the operator keeps undoing (a mutating webhook, a GitOps tool) is put back
// every healthyInterval, not every second.
func changesCluster(pl plan.Plan) bool {
	return slices.ContainsFunc(pl.Actions, func(a plan.Action) bool { return !plan.Upkeep(a) })
}

// resolvedACL is the cluster's merged ACL bindings and the roles they name.
type resolvedACL struct {
	bindings []v1.ACLBinding
	roles    map[string]v1.ValkeyRoleSpec
}

// validateTLS checks a TLS cluster's Secret on every pass, in every state (security/tls.md): a
// Secret that fails is the reason the cluster is Invalid, said once per new reason on the TLS
// target in the original's words. Its nodes are left as they are, serving the certificate they
// have. Nil material and no problem for a cluster without TLS.
func (r *ValkeyClusterReconciler) validateTLS(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster) (*tlsmaterial.Material, string, error) {
	if vc.Spec.TLS == nil {
		return nil, "", nil
	}
	tm, problem, rv, err := readTLSSecret(ctx, r.APIReader, vc)
	if err == nil && rv != "" && r.TLSSecretSeen != nil {
		r.TLSSecretSeen(types.NamespacedName{Namespace: vc.Namespace, Name: vc.Name}, rv)
	}
	if err != nil || problem == "" {
		return tm, "", err
	}
	if vc.Status.State != fsm.Invalid || vc.Status.Message != problem {
		logging.Target(log, logging.TargetTLS).Info(logging.MsgTLSValidationFailed, zap.String(logging.FieldReason, problem))
	}
	return nil, problem, nil
}

// load resolves the cluster's references: its config chain, its merged ACL bindings and their
// roles. A reference that does not resolve, or a username bound twice, is returned as problem
// (the cluster goes Invalid, and its nodes keep the ACL they have); err is a transient API
// error.
func (r *ValkeyClusterReconciler) load(ctx context.Context, vc *v1.ValkeyCluster) (*resources.ResolvedConfig, *resolvedACL, string, error) {
	// Admission refuses these; a cluster stored before a rule existed still must not put them
	// on a pod (an annotation that loosens its confinement, or more than a pod can carry).
	if err := v1.CheckPodAnnotations(vc.Spec.PodAnnotations); err != nil {
		return nil, nil, err.Error(), nil
	}
	if err := v1.CheckNetworkClients(vc.Spec.Network); err != nil {
		return nil, nil, err.Error(), nil
	}
	rc, err := resolveConfig(ctx, r.Client, vc.Spec.ConfigRef)
	var sp *SpecProblem
	if errors.As(err, &sp) {
		return nil, nil, sp.Reason, nil
	} else if err != nil {
		return nil, nil, "", err
	}
	if problem := maxclientsProblem(rc.Valkey["maxclients"], int(vc.Spec.Shards)*(int(vc.Spec.ReplicasPerShard)+1)); problem != "" {
		return nil, nil, problem, nil
	}
	bindings, problem := acl.MergeBindings(rc.ACL, vc.Spec.ACL)
	if problem != "" {
		return nil, nil, problem, nil
	}
	roles, err := resolveRoles(ctx, r.Client, bindings)
	if errors.As(err, &sp) {
		return nil, nil, sp.Reason, nil
	} else if err != nil {
		return nil, nil, "", err
	}
	return rc, &resolvedACL{bindings: bindings, roles: roles}, "", nil
}

// ensureObjects reads what the pods need before they start and writes nothing: the operator's
// credential Secret (generated for a new cluster, returned as credential when it is to be
// written: ensureCredential). It returns the system users (the ACL Secret is rendered from them
// later in the pass, once the observation says whether a reshard is pending) and the operator's
// credentials.
//
// Each of them, and the ACL Secret, is used only when the cluster controls it (ownership.go): an
// object of one of their names that it does not control is returned as a *SpecProblem, before
// any pod could mount it.
func (r *ValkeyClusterReconciler) ensureObjects(ctx context.Context, vc *v1.ValkeyCluster, rc *resources.ResolvedConfig) (sys acl.SystemUsers, creds, migrate valkey.Credentials, credential *corev1.Secret, err error) {
	if err = r.recheckForeign(ctx, vc); err != nil {
		return sys, creds, migrate, nil, err
	}
	if err = r.checkACLSecret(ctx, vc); err != nil {
		return sys, creds, migrate, nil, err
	}
	if sys, credential, err = r.ensureCredential(ctx, vc); err != nil {
		return sys, creds, migrate, nil, err
	}
	if sys.LegacyReplication, err = r.legacyReplication(ctx, vc); err != nil {
		return sys, creds, migrate, nil, err
	}
	sys.SetUsers = !version.Parse(rc.Image.Version).SafeACLLoad()
	sys.Atomic = version.Parse(rc.Image.Version).AtomicSlotMigration()
	creds = valkey.Credentials{Username: acl.OperatorUser, Password: sys.OperatorPassword}
	migrate = valkey.Credentials{Username: acl.MigrationUser, Password: sys.MigratePassword}
	return sys, creds, migrate, credential, nil
}

// serviceState reads the cluster's headless Service: missing, or stored without the original's
// port names and selector (behind: created by an older operator). One of its name that the
// cluster does not control is a *SpecProblem, before any pod could be reached through it.
func (r *ValkeyClusterReconciler) serviceState(ctx context.Context, vc *v1.ValkeyCluster) (missing, behind bool, err error) {
	var svc corev1.Service
	err = r.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: resources.ServiceName(vc)}, &svc)
	switch {
	case err == nil && !metav1.IsControlledBy(&svc, vc):
		r.foreign.add(clusterKey(vc), objectRef{"Service", svc.Name})
		return false, false, notControlled("Service", svc.Name, vc.Name)
	case apierrors.IsNotFound(err):
		// The cache holds only labelled Services: one of this name without the label is
		// found by a read of the API server.
		exists, err := r.checkOwned(ctx, vc, &corev1.Service{}, "Service", resources.ServiceName(vc))
		return !exists, false, err
	case err != nil:
		return false, false, fmt.Errorf("get service: %w", err)
	}
	return false, resources.ServiceBehind(vc, &svc), nil
}

// createService creates the cluster's headless Service (plan.CreateService). One created
// meanwhile is the cluster's, or a *SpecProblem.
func (r *ValkeyClusterReconciler) createService(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster) error {
	log.Info(logging.MsgCreatingService)
	if err := r.Create(ctx, resources.BuildService(vc)); apierrors.IsAlreadyExists(err) {
		_, err = r.checkOwned(ctx, vc, &corev1.Service{}, "Service", resources.ServiceName(vc))
		return err
	} else if err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	return nil
}

// updateService brings a Service an operator created before the original's port names and
// selector up to date in place (plan.UpdateService; the pods carry both labels, so its endpoints
// stay the same). The cache keeps a bounded part of a Service's spec (stripService): the patch is
// made against the stored object, so a selector key of the old one does not survive a merge.
func (r *ValkeyClusterReconciler) updateService(ctx context.Context, log *zap.Logger, vc *v1.ValkeyCluster) error {
	var svc corev1.Service
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: resources.ServiceName(vc)}, &svc); err != nil {
		return fmt.Errorf("get service: %w", err)
	}
	if !metav1.IsControlledBy(&svc, vc) || !resources.ServiceBehind(vc, &svc) {
		return nil
	}
	log.Info(logging.MsgUpdatingService)
	before := svc.DeepCopy()
	resources.UpdateService(vc, &svc)
	if err := r.Patch(ctx, &svc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update service: %w", err)
	}
	return nil
}

// checkACLSecret returns a *SpecProblem when a Secret of the ACL Secret's name exists that vc
// does not control: the pass renders and mounts that Secret into every pod.
func (r *ValkeyClusterReconciler) checkACLSecret(ctx context.Context, vc *v1.ValkeyCluster) error {
	_, err := r.checkOwned(ctx, vc, &corev1.Secret{}, "Secret", resources.ACLSecretName(vc))
	return err
}

// forgetCluster drops what the reconciler keeps of a cluster that is gone or going.
func (r *ValkeyClusterReconciler) forgetCluster(key string) {
	r.conns.Forget(key)
	r.clusterMemory.forget(key)
	r.Guard.Forget(key)
	if ns, name, ok := strings.Cut(key, "/"); ok {
		r.Metrics.Forget(ns, name)
		if r.changes != nil {
			r.changes.Forget(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
}

// ensureCredential returns the system users' passwords for vc, and the credential Secret to
// write (plan.WriteCredential; nil when the stored one is as it should be): a new one, generated
// once, for a cluster that has no pod yet; a Secret restored by hand, adopted; one from an
// operator that had no replication user, with its repl-password key added (see replPassword).
// Missing under a cluster that has pods, it is a *credentialMissing: never regenerated (see
// credential.go). The pass renders and connects with the passwords of the Secret to write, which
// the executor writes before anything that depends on them.
func (r *ValkeyClusterReconciler) ensureCredential(ctx context.Context, vc *v1.ValkeyCluster) (acl.SystemUsers, *corev1.Secret, error) {
	var s corev1.Secret
	var write *corev1.Secret
	key := types.NamespacedName{Namespace: vc.Namespace, Name: resources.CredentialSecretName(vc)}
	err := r.APIReader.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		live, err := r.hasPods(ctx, vc)
		if err != nil {
			return acl.SystemUsers{}, nil, err
		}
		if live {
			return acl.SystemUsers{}, nil, &credentialMissing{Secret: key.Name, Key: resources.OperatorPasswordKey, ACLSecret: resources.ACLSecretName(vc)}
		}
		fresh, err := resources.BuildCredentialSecret(vc)
		if err != nil {
			return acl.SystemUsers{}, nil, err
		}
		s, write = *fresh, fresh
	} else if err != nil {
		return acl.SystemUsers{}, nil, fmt.Errorf("get credential secret: %w", err)
	}
	if !metav1.IsControlledBy(&s, vc) {
		// A Secret the user restored by hand (from a backup, after it was deleted: see
		// credentialMissing) under a cluster that has nodes holds the password those nodes
		// already accept, and nobody else's: it is adopted. Before the cluster has a node, it
		// was planted, or is an application's: whoever wrote it would choose the operator's
		// password.
		live, err := r.hasPods(ctx, vc)
		if err != nil {
			return acl.SystemUsers{}, nil, err
		}
		if !live || metav1.GetControllerOf(&s) != nil {
			r.foreign.add(clusterKey(vc), objectRef{"Secret", s.Name})
			return acl.SystemUsers{}, nil, notControlled("Secret", s.Name, vc.Name)
		}
		s.OwnerReferences = append(s.OwnerReferences, resources.OwnerRef(vc))
		write = &s
	}
	r.foreign.drop(clusterKey(vc), objectRef{"Secret", s.Name})
	if resources.OperatorPassword(s.Data) == "" {
		return acl.SystemUsers{}, nil, fmt.Errorf("credential secret %s has no key %q", s.Name, resources.OperatorPasswordKey)
	}
	if len(s.Data[resources.ReplPasswordKey]) == 0 {
		repl, err := r.replPassword(ctx, vc)
		if err != nil {
			return acl.SystemUsers{}, nil, err
		}
		s.Data[resources.ReplPasswordKey] = []byte(repl)
		write = &s
	}
	// The migration user's password: a Secret from before it existed derives one as new
	// clusters do, which no node uses yet; the ACL controller gives it to every node. While a
	// rotation is under way, the passwords of the phase the status records (rotation.go).
	return withPasswords(acl.SystemUsers{}, resources.ForPhase(rotationPhase(vc), s.Data)), write, nil
}

// writeCredential writes the credential Secret the pass holds (plan.WriteCredential): creates a
// new one, or updates the one read (adopted, or given its repl-password key) against the version
// read. A Secret created meanwhile is an error: the next pass reads it.
func (r *ValkeyClusterReconciler) writeCredential(ctx context.Context, s *corev1.Secret) error {
	if s == nil {
		return errors.New("broken invariant: no credential Secret to write")
	}
	if s.ResourceVersion == "" {
		if err := r.Create(ctx, s); err != nil {
			return fmt.Errorf("create credential secret: %w", err)
		}
		return nil
	}
	if err := r.Update(ctx, s); err != nil {
		return fmt.Errorf("update credential secret: %w", err)
	}
	return nil
}

// replPassword is the replication password for a credential Secret that lacks it: the one the
// nodes already use when the cluster's auth.conf names the replication user (the key was lost,
// say the Secret was restored from a copy taken before it existed: running replicas hold that
// password and must keep it), a new one otherwise (the Secret predates the replication user,
// so no node uses one yet).
func (r *ValkeyClusterReconciler) replPassword(ctx context.Context, vc *v1.ValkeyCluster) (string, error) {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: vc.Namespace, Name: resources.ACLSecretName(vc)}, &s)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("get acl secret: %w", err)
	}
	if err == nil && !metav1.IsControlledBy(&s, vc) {
		s = corev1.Secret{} // not the cluster's: its masterauth is nobody's password to trust
	}
	var user, pw string
	for _, line := range strings.Split(string(s.Data[resources.AuthFileName]), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "masteruser" {
			user = v
		} else if ok && k == "masterauth" {
			pw = v
		}
	}
	if user == acl.ReplicationUser && pw != "" {
		return pw, nil
	}
	return resources.NewPassword()
}

// legacyReplication reports whether a live pod of vc was started by an operator whose replicas
// authenticated as the operator's user (it lacks the replication-user annotation): see
// acl.SystemUsers.LegacyReplication. Read from the cache: the operator never creates such a pod, so
// a stale list can only keep the transition a moment longer.
func (r *ValkeyClusterReconciler) legacyReplication(ctx context.Context, vc *v1.ValkeyCluster) (bool, error) {
	var list corev1.PodList
	// By the cache's index, not a label selector, which scans the namespace: 12 % of the
	// operator's CPU at 1 000 clusters in one namespace (the simulated fleet's profile).
	if err := r.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingFields{IndexByCluster: vc.Name}); err != nil {
		return false, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if p.Annotations[v1.AnnotationReplicationUser] == "" {
			return true, nil
		}
	}
	return false, nil
}

// secretStale reports whether the stored copy of want, a Secret, is missing or holds other data:
// whether apply would write it. A Secret of its name that its owner does not control is a
// *SpecProblem, as for apply.
func (r *ValkeyClusterReconciler) secretStale(ctx context.Context, want *corev1.Secret) (bool, error) {
	var have corev1.Secret
	// Through APIReader, as apply: its copy of the operator's own Secrets stays while their
	// version does, so a steady pass reads nothing from the API server here.
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), &have)
	if apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("get %s: %w", want.GetName(), err)
	}
	if owner := metav1.GetControllerOf(want); owner != nil && !ownedBy(&have, *owner) {
		return false, &SpecProblem{Reason: fmt.Sprintf("%s is not controlled by %s %s", want.GetName(), owner.Kind, owner.Name)}
	}
	return !maps.EqualFunc(have.Data, want.Data, bytes.Equal), nil
}

// apply creates obj, or updates its data when it differs. Only ConfigMaps and Secrets (the
// operator's RBAC lets it update Secrets only).
func (r *ValkeyClusterReconciler) apply(ctx context.Context, obj client.Object) error {
	existing := obj.DeepCopyObject().(client.Object)
	// Through APIReader: no cache holds Secrets or ConfigMaps, and the operator's APIReader keeps
	// a copy of its own Secrets while their version stays (SecretsByVersion).
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, obj); apierrors.IsAlreadyExists(err) {
			// Not in the cache, so not labelled as the operator's: whose is it?
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
				return fmt.Errorf("get %s: %w", obj.GetName(), err)
			}
			if owner := metav1.GetControllerOf(obj); owner != nil && !ownedBy(existing, *owner) {
				return &SpecProblem{Reason: fmt.Sprintf("%s is not controlled by %s %s", obj.GetName(), owner.Kind, owner.Name)}
			}
			return nil
		} else if err != nil {
			return fmt.Errorf("create %s: %w", obj.GetName(), err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("get %s: %w", obj.GetName(), err)
	}
	if owner := metav1.GetControllerOf(obj); owner != nil && !ownedBy(existing, *owner) {
		// ensureObjects checked it at the start of the pass; this is an object swapped since.
		return &SpecProblem{Reason: fmt.Sprintf("%s is not controlled by %s %s", obj.GetName(), owner.Kind, owner.Name)}
	}
	switch want := obj.(type) {
	case *corev1.ConfigMap:
		have := existing.(*corev1.ConfigMap)
		if maps.Equal(have.Data, want.Data) {
			return nil
		}
		have.Data = want.Data
	case *corev1.Secret:
		have := existing.(*corev1.Secret)
		if maps.EqualFunc(have.Data, want.Data, bytes.Equal) {
			return nil
		}
		have.Data = want.Data
	}
	if err := r.Update(ctx, existing); err != nil {
		return fmt.Errorf("update %s: %w", obj.GetName(), err)
	}
	return nil
}
