package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gomomento/valkey-operator/tests/chaos/schedule"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// HoldBound is how long a fault waits for its target to be safe to hit (the package schedule's
// rules 1 and 2) before it is reported as not fired: a killed pod's replacement starts, joins
// and finishes its first sync in 10–20 s here, a stopped node's pods are replaced within about
// 40 s, and a roll or a reshard may keep a shard's new replica syncing a while longer on a
// loaded machine. A fault held back this long is a finding of its own (a shard that does not
// heal), listed in the report, never dropped silently.
const HoldBound = 2 * time.Minute

// shardKey names one shard of one cluster.
type shardKey struct {
	cluster string
	shard   int
}

// world is one observation of every cluster: its running pods, what each node says, and which
// pods hold each shard's data now.
type world struct {
	pods  map[string][]corev1.Pod    // by cluster name
	views map[string]valkey.NodeView // by pod name (namespace/name)
	// copies are the pods that hold a shard's data now: reachable, and a primary serving slots
	// or a replica whose link to its primary is up.
	copies map[shardKey][]string
	shards map[string][]int // the shard indices present, sorted, by cluster
}

func podID(p corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (r *runner) observe(ctx context.Context) (*world, error) {
	w := &world{pods: map[string][]corev1.Pod{}, views: map[string]valkey.NodeView{}, copies: map[shardKey][]string{}, shards: map[string][]int{}}
	for _, c := range r.targets {
		pods, err := c.pods(ctx)
		if err != nil {
			return nil, err
		}
		creds, err := c.creds(ctx, pods)
		if err != nil {
			return nil, err
		}
		addrs := make([]string, len(pods))
		for i, p := range pods {
			addrs[i] = harness.PodAddr(p)
		}
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		views := valkey.Observe(octx, addrs, creds)
		cancel()
		w.pods[c.name] = pods
		for i, p := range pods {
			v := views[i]
			w.views[podID(p)] = v
			sk := shardKey{c.name, shardOf(p)}
			if !slices.Contains(w.shards[c.name], sk.shard) {
				w.shards[c.name] = append(w.shards[c.name], sk.shard)
			}
			me, _ := v.Myself()
			if v.ServesSlots() || (v.Reachable && me.Role == valkey.RoleReplica && v.ReplicaLinkUp()) {
				w.copies[sk] = append(w.copies[sk], podID(p))
			}
		}
		sort.Ints(w.shards[c.name])
	}
	return w, nil
}

// resolve turns an event's abstract target into a pod, now: the shard index is taken modulo the
// shards present; the primary is the reachable node of that shard serving slots; a replica is
// picked among the shard's reachable replicas in name order.
func (w *world) resolve(e schedule.Event) (corev1.Pod, string) {
	present := w.shards[e.Cluster]
	if len(present) == 0 {
		return corev1.Pod{}, "no running pods"
	}
	shard := present[e.Shard%len(present)]
	var candidates []corev1.Pod
	for _, p := range w.pods[e.Cluster] {
		if shardOf(p) != shard {
			continue
		}
		v := w.views[podID(p)]
		me, _ := v.Myself()
		switch {
		case !v.Reachable:
		case e.Role == schedule.Primary && me.Role == valkey.RolePrimary && len(me.Slots) > 0:
			candidates = append(candidates, p)
		case e.Role == schedule.Replica && me.Role == valkey.RoleReplica:
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return corev1.Pod{}, fmt.Sprintf("shard %d has no reachable %s", shard, e.Role)
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
	return candidates[e.Pick%len(candidates)], ""
}

// safe says why losing victims at once could lose data by design (rules 1 and 2 of package
// schedule), or "" when it cannot: no shard may lose two copies at once, and every shard that
// loses one must keep another copy holding its data.
func (w *world) safe(victims []string) string {
	lost := map[shardKey]int{}
	for sk, copies := range w.copies {
		for _, v := range victims {
			if slices.Contains(copies, v) {
				lost[sk]++
			}
		}
	}
	for _, v := range victims {
		// A victim that holds no copy (a replica still syncing) may belong to a shard whose
		// every copy is elsewhere; a shard with no copy at all is mid-failover: wait for it.
		ns, name, _ := strings.Cut(v, "/")
		for cname, pods := range w.pods {
			for _, p := range pods {
				if p.Namespace == ns && p.Name == name {
					if sk := (shardKey{cname, shardOf(p)}); len(w.copies[sk]) == 0 {
						return fmt.Sprintf("%s shard %d has no copy holding its data now (failing over or syncing)", cname, sk.shard)
					}
				}
			}
		}
	}
	for sk, n := range lost {
		switch {
		case n > 1:
			return fmt.Sprintf("%s shard %d would lose %d copies at once", sk.cluster, sk.shard, n)
		case len(w.copies[sk])-n < 1:
			return fmt.Sprintf("%s shard %d would lose its last copy holding its data (%d synced)", sk.cluster, sk.shard, len(w.copies[sk]))
		}
	}
	return ""
}

// zoneLossTarget is a pod on the Kubernetes node to stop for a zone loss: of the nodes whose
// loss takes no shard's last copy nor two copies at once (safe), the one that runs the most
// primaries serving slots over every cluster (ties by node name). In the local cluster a node is
// a zone: this is the zone whose loss costs the most primaries at once. The zero Pod and the
// reason when no node will do.
func (w *world) zoneLossTarget() (corev1.Pod, string) {
	count := map[string]int{}
	pod := map[string]corev1.Pod{}
	for _, pods := range w.pods {
		for _, p := range pods {
			v := w.views[podID(p)]
			me, _ := v.Myself()
			if p.Spec.NodeName == "" || !v.Reachable || me.Role != valkey.RolePrimary || len(me.Slots) == 0 {
				continue
			}
			count[p.Spec.NodeName]++
			pod[p.Spec.NodeName] = p
		}
	}
	nodes := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	why := "no node runs a primary"
	for i, n := range nodes {
		if reason := w.safe(w.onNode(n)); reason != "" {
			if i == 0 {
				why = n + ": " + reason
			}
			continue
		}
		return pod[n], ""
	}
	return corev1.Pod{}, why
}

// onNode lists every chaos pod running on node.
func (w *world) onNode(node string) []string {
	var out []string
	for _, pods := range w.pods {
		for _, p := range pods {
			if p.Spec.NodeName == node {
				out = append(out, podID(p))
			}
		}
	}
	sort.Strings(out)
	return out
}

// podByID finds a running pod of the observation.
func (w *world) podByID(id string) (corev1.Pod, bool) {
	for _, pods := range w.pods {
		for _, p := range pods {
			if podID(p) == id {
				return p, true
			}
		}
	}
	return corev1.Pod{}, false
}

// primariesOn is how many of cluster's pods on node serve slots in this observation.
func (w *world) primariesOn(cluster, node string) int {
	n := 0
	for _, p := range w.pods[cluster] {
		if p.Spec.NodeName != node {
			continue
		}
		if w.views[podID(p)].ServesSlots() {
			n++
		}
	}
	return n
}
