package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/valkey"
)

// observation is one read-only look at a cluster: its ValkeyNodes and pods (by name) and the
// snapshot the pure decision works on.
type observation struct {
	nodes    map[string]*v1.ValkeyNode
	pods     map[string]*corev1.Pod
	snapshot fsm.Snapshot
	// addrs maps each pod's node address to the pod's name (the name a TLS node is verified
	// under).
	addrs map[string]string
	// tls is the TLS Secret's material when the cluster runs TLS and it passed validation.
	tls *tlsmaterial.Material
	// stats are the figures of each answering node's INFO that only the metrics use, by pod.
	stats map[string]valkey.NodeStats
	// vc is the cluster observed (what its Events are recorded on); nil in tests that build an
	// observation by hand.
	vc *v1.ValkeyCluster
	// budgets are the shards' PodDisruptionBudgets the cluster controls, by shard index (what a
	// plan.SetBudget patches and a plan.DeleteBudget deletes); budgetErr is why they are not
	// known this pass (observeBudgets), returned with the pass's outcome.
	budgets   map[int]*policyv1.PodDisruptionBudget
	budgetErr error
	// networkPolicy is the cluster's NetworkPolicy, when it controls one (what a
	// plan.SetNetworkPolicy patches and a plan.DeleteNetworkPolicy deletes); networkErr is why
	// it is not known this pass (observeNetworkPolicy), returned with the pass's outcome.
	networkPolicy *networkingv1.NetworkPolicy
	networkErr    error
	// aclSecret is the ACL Secret this pass renders (what a plan.WriteACLSecret writes), nil
	// while the spec cannot be acted on.
	aclSecret *corev1.Secret
	// credential is the credential Secret a plan.WriteCredential writes (nil when the stored one
	// is as it should be).
	credential *corev1.Secret
	// heldSize is the memory a node created this pass gets while a shrink is refused
	// (plan.HeldSize), nil when none is: the spec's.
	heldSize *resource.Quantity
	// held is the LiveSettingsHeld message of the live settings changes held until confirmed ("":
	// none); heldKnown is false when the pass could not tell (holdEvictions did not run).
	held      string
	heldKnown bool
	// rotation is status.passwordRotation as this pass leaves it (rotation.go), and primaryAuth
	// the replication password of its phase (what a plan.SetPrimaryAuth sets): never logged.
	rotation    *v1.PasswordRotationStatus
	primaryAuth string
	// rotationEntered: the rotation entered its phase this pass (said once the status is written).
	rotationEntered bool
}

// clusterKey is the observed cluster's "namespace/name", "" when vc is not set.
func (o *observation) clusterKey() string {
	if o.vc == nil {
		return ""
	}
	return clusterKey(o.vc)
}

// observe lists the cluster's ValkeyNodes and their pods and asks every running pod's node for
// CLUSTER NODES, CLUSTER INFO and INFO replication (valkey.Observe, concurrently). A node that
// does not answer is kept, marked unreachable. A ValkeyNode without a pod is a lost node (see
// lostNode); a pod whose ValkeyNode is gone or being deleted is on its way out (Deleting): the
// garbage collector removes it.
//
// Both are listed from the API server, not the cache: an object created on the previous pass
// may not be in the cache yet, and deciding on a stale list would create it again. So are the
// shards' disruption budgets (observeBudgets), and each pod's missing annotations are noted
// (annotationsBehind): what the bookkeeping planners need.
func (r *ValkeyClusterReconciler) observe(ctx context.Context, vc *v1.ValkeyCluster, problem, specHash string, creds valkey.Credentials) (*observation, error) {
	nodes, err := r.observeNodes(ctx, vc)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if list.Items, err = listPods(ctx, r.APIReader, vc, podNames(vc, nodes)); err != nil {
		return nil, err
	}
	unlisted, err := r.unlistedPods(ctx, nodes, list.Items)
	if err != nil {
		return nil, err
	}
	list.Items = append(list.Items, unlisted...)
	o := &observation{nodes: nodes, pods: map[string]*corev1.Pod{}, addrs: podAddrs(list.Items), vc: vc}
	creds = withTLS(vc, creds, creds.TLS, o.addrs)
	topology := topologyOf(&vc.Spec)
	if t := bootstrapTarget(vc); t != nil {
		topology = t // edits of the topology wait until the cluster is formed (targetspec.go)
	}
	o.snapshot = fsm.Snapshot{
		State:            vc.Status.State,
		SpecProblem:      problem,
		Shards:           int(topology.Shards),
		ReplicasPerShard: int(topology.ReplicasPerShard),
		SpecHash:         specHash,
		Hostnames:        vc.Spec.TLS != nil,
		Failover:         failoverIntent(vc.Status.Failover),
		Now:              time.Now(),
	}
	if c := meta.FindStatusCondition(vc.Status.Conditions, v1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		o.snapshot.ReadySince = c.LastTransitionTime.Time
	}
	if f := vc.Status.FormedAt; f != nil {
		o.snapshot.FormedAt = f.Time
	}
	lastIDs := map[string]string{}
	for _, name := range vc.Status.Nodes {
		// Names only: the first status an operator before nodeDetails wrote, read as names.
		lastIDs[name] = ""
	}
	for _, ns := range vc.Status.NodeDetails {
		lastIDs[ns.Pod] = ns.NodeID
	}
	addrs, queried := o.addPods(vc, list.Items, nodes, lastIDs, problem)
	if len(addrs) > 0 {
		r.askNodes(ctx, vc, o, addrs, queried, creds)
	}
	sort.Slice(o.snapshot.Pods, func(i, j int) bool { return o.snapshot.Pods[i].Name < o.snapshot.Pods[j].Name })
	r.served.observe(clusterKey(vc), &o.snapshot)
	// Zones are for placement, which can wait: a node list that fails (an informer not synced, a
	// ClusterRole from before this version) leaves them unknown rather than stall the pass and
	// the failovers it may carry.
	zctx, cancel := context.WithTimeout(ctx, zonesTimeout)
	zones, err := r.observeZones(zctx, vc)
	cancel()
	if err == nil {
		applyZones(&o.snapshot, zones, o.pods)
	}
	o.budgetErr = r.observeBudgets(ctx, vc, o)
	o.networkErr = r.observeNetworkPolicy(ctx, vc, o)
	return o, nil
}

// addPods adds to the snapshot a view of every pod of list that is its node's (and of every
// ValkeyNode without one: lost, or foreign in its place), and returns the node addresses to ask
// and the index in the snapshot of each one's pod.
func (o *observation) addPods(vc *v1.ValkeyCluster, items []corev1.Pod, nodes map[string]*v1.ValkeyNode, lastIDs map[string]string, problem string) (addrs []string, queried []int) {
	foreign := map[string]string{}
	for i := range items {
		pod := &items[i]
		vn, byNode := nodeOf(pod, nodes)
		if _, known := lastIDs[pod.Name]; !byNode || (vn == nil && !known) {
			// Not a node's pod: the cluster label proves nothing. A pod whose ValkeyNode is gone
			// is one the operator retired only if the last status listed it; any other pod
			// naming a ValkeyNode it cannot show is nobody's, and is never asked (the operator's
			// credentials would go to it).
			continue
		}
		if vn != nil {
			// The node's own pod, or a foreign one in its place (identity.go): that one is
			// shown as its node down, below, and never asked.
			if why := foreignReason(pod, vn); why != "" {
				foreign[pod.Name] = why
				continue
			}
		}
		o.pods[pod.Name] = pod
		p := podView(pod)
		p.LastNodeID = lastIDs[pod.Name]
		if vn == nil || vn.DeletionTimestamp != nil {
			p.Deleting = true
		} else {
			p.Lifecycle = string(vn.Spec.Lifecycle)
			// Recomputed from the record, never taken from the pod's annotation, which an older
			// operator wrote with its own hash function (live settings included): only a deleting
			// pod keeps the annotation's, and a deleting pod is never counted outdated.
			p.SpecHash = resources.NodeSpecHash(&vn.Spec)
			p.MovedFrom = vn.Annotations[v1.AnnotationMovedFrom]
			p.Settings = vn.Spec.ValkeySettings
			p.StartHash = resources.StartSpecHash(&vn.Spec)
			p.Unrecorded = vn.Status.PodUID == ""
			p.ShapeHash, p.Size, p.Resize = resources.ShapeHash(&vn.Spec), sizeOf(vn), resizeView(pod)
		}
		if problem == "" {
			p.AnnotationsBehind = annotationsBehind(vc, pod)
		}
		// A deleting pod whose process still runs is asked too: a primary on its way out (a
		// drain) says which node id it is and whether it still serves, so that its slots are
		// handed over before it stops. Not one whose ValkeyNode is gone (a node retired a pass
		// ago): no record is left to tell it from another pod of its name.
		if p.Phase == fsm.PodRunning && p.IP != "" && !p.Exited && problem == "" && vn != nil {
			addrs = append(addrs, nodeAddr(p.IP))
			queried = append(queried, len(o.snapshot.Pods))
		}
		o.snapshot.Pods = append(o.snapshot.Pods, p)
	}
	for name, vn := range nodes {
		if why, ok := foreign[name]; ok && vn.DeletionTimestamp == nil {
			o.snapshot.Pods = append(o.snapshot.Pods, foreignNode(vn, why, lastIDs[name]))
			continue
		}
		if _, ok := o.pods[name]; !ok && vn.DeletionTimestamp == nil {
			lost := lostNode(vn)
			lost.SpecHash = resources.NodeSpecHash(&vn.Spec)
			lost.StartHash = resources.StartSpecHash(&vn.Spec)
			lost.LastNodeID = lastIDs[name]
			o.snapshot.Pods = append(o.snapshot.Pods, lost)
		}
	}
	return addrs, queried
}

// askNodes asks the nodes at addrs for their view (valkey.Pool.Observe, concurrently) and sets
// it on their pods' views (queried: their index in the snapshot).
func (r *ValkeyClusterReconciler) askNodes(ctx context.Context, vc *v1.ValkeyCluster, o *observation, addrs []string, queried []int, creds valkey.Credentials) {
	views := r.conns.Observe(ctx, clusterKey(vc), addrs, creds)
	o.stats = map[string]valkey.NodeStats{}
	for i, v := range views {
		if pe := (*logging.PanicError)(nil); errors.As(v.Err, &pe) {
			logging.LogPanic(logging.FromContext(ctx), o.snapshot.Pods[queried[i]].Name, pe)
		}
		o.snapshot.Pods[queried[i]].Node = nodeView(v)
		if valkey.IsWrongPass(v.Err) {
			// What the operator's own credentials say about the cause: a password in its
			// Secret changed by hand (docs/user/failure-handling.md says how to restore it).
			o.snapshot.Pods[queried[i]].Node.Err += fmt.Sprintf(" (the node refuses the password in key %s of Secret %s: was it changed by hand? put back the value the cluster was created with)",
				resources.OperatorPasswordKey, resources.CredentialSecretName(vc))
		}
		if v.Reachable {
			o.stats[o.snapshot.Pods[queried[i]].Name] = v.Stats()
		}
	}
}

// podView is the part of a Pod the decision needs.
func podView(pod *corev1.Pod) fsm.Pod {
	// The label is anyone's to edit who may edit the pod: outside the shards a cluster can have,
	// it is no shard (-1), never a number that wraps.
	shard, err := strconv.Atoi(pod.Labels[v1.LabelShard])
	if err != nil || shard < 0 || shard > v1.MaxShardIndex {
		shard = -1
	}
	p := fsm.Pod{
		Name:     pod.Name,
		Shard:    shard,
		Phase:    fsm.Phase(pod.Status.Phase),
		IP:       pod.Status.PodIP,
		Deleting: pod.DeletionTimestamp != nil,
		Created:  pod.CreationTimestamp.Time,
		SpecHash: pod.Annotations[v1.AnnotationSpecHash],
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			p.Exited = true
			p.Failure = fmt.Sprintf("%s, exit code %d", t.Reason, t.ExitCode)
			// 128+n is death by signal n: killed, not refusing to start.
			p.StartFailure = t.ExitCode > 0 && t.ExitCode < 128
		}
	}
	if p.Phase == "" {
		p.Phase = fsm.PodPending
	}
	containersReady := false
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			p.Ready = c.Status == corev1.ConditionTrue
		case c.Type == corev1.ContainersReady:
			containersReady = c.Status == corev1.ConditionTrue
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			p.Unschedulable, p.UnschedulableSince = c.Message, c.LastTransitionTime.Time
			if p.Unschedulable == "" {
				p.Unschedulable = c.Reason
			}
		}
	}
	p.NodeLost = p.Phase == fsm.PodRunning && !p.Ready && containersReady
	return p
}

// nodeView converts what a node said into the decision's terms.
func nodeView(v valkey.NodeView) *fsm.Node {
	n := &fsm.Node{Reachable: v.Reachable, ID: v.ID}
	if v.Err != nil {
		n.Err = v.Err.Error()
	}
	if !v.Reachable {
		return n
	}
	n.ClusterStateOK = v.ClusterStateOK()
	n.SlotsAssigned, _ = strconv.Atoi(v.ClusterInfo["cluster_slots_assigned"])
	n.LinkUp = v.ReplicaLinkUp()
	n.ReplOffset, _ = v.ReplicationOffset()
	n.SyncInProgress = v.Replication["master_sync_in_progress"] == "1"
	n.Version = v.Version
	n.VolatileItemKeys = v.VolatileItemKeys()
	n.UsedMemoryRSS, _ = strconv.ParseInt(v.Replication["used_memory_rss"], 10, 64)
	n.Config = v.Config
	// Only a refusal (NOPERM, an unknown command) is the node's to report: a CONFIG GET that
	// timed out on a busy node that answered the rest leaves its settings unchecked for this pass
	// (Config nil), without turning Ready False for one pass.
	if v.ConfigErr != nil && valkey.IsServerError(v.ConfigErr) {
		n.ConfigErr = v.ConfigErr.Error()
	}
	n.CurrentEpoch, _ = strconv.ParseUint(v.ClusterInfo["cluster_current_epoch"], 10, 64)
	n.Known = map[string]slot.Set{}
	n.Epochs = map[string]uint64{}
	n.Failed = map[string]bool{}
	n.Suspected = map[string]bool{}
	for _, e := range v.Nodes {
		if e.Handshake && e.IP != "" {
			if n.Meeting == nil {
				n.Meeting = map[string]bool{}
			}
			n.Meeting[e.IP] = true
		}
		if e.Handshake || e.NoAddr {
			continue
		}
		n.Known[e.ID] = e.Slots
		n.Epochs[e.ID] = e.ConfigEpoch
		if e.Hostname == "" {
			if n.NoHostname == nil {
				n.NoHostname = map[string]bool{}
			}
			n.NoHostname[e.ID] = true
		}
		if e.Fail {
			n.Failed[e.ID] = true
		}
		if e.PFail {
			n.Suspected[e.ID] = true
		}
		if e.Role == valkey.RoleReplica && e.PrimaryID != "" {
			if n.Follows == nil {
				n.Follows = map[string]string{}
			}
			n.Follows[e.ID] = e.PrimaryID
		}
		if e.Myself {
			n.Primary = e.Role == valkey.RolePrimary
			n.PrimaryID = e.PrimaryID
			n.MySlots = e.Slots
			for _, m := range e.Migrating {
				if n.Migrating == nil {
					n.Migrating = map[int]string{}
				}
				n.Migrating[m.Slot] = m.NodeID
			}
			for _, m := range e.Importing {
				if n.Importing == nil {
					n.Importing = map[int]string{}
				}
				n.Importing[m.Slot] = m.NodeID
			}
		}
	}
	return n
}

// failoverIntent is status.failover in the decision's terms.
func failoverIntent(f *v1.FailoverStatus) *fsm.FailoverIntent {
	if f == nil {
		return nil
	}
	return &fsm.FailoverIntent{Shard: int(f.Shard), Pod: f.Pod, PrimaryID: f.PrimaryNodeID, Force: f.Mode == string(valkey.FailoverForce), Takeover: f.Mode == string(valkey.FailoverTakeover), StartedAt: f.StartedAt.Time}
}
