package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// aclTimeout bounds the wait for an ACL edit to reach every node: the kubelet's Secret refresh
// plus the ACL controller's catch-up (it does not wait for its 30 s tick).
const aclTimeout = 45 * time.Second

// aclTick is the ACL controller's heartbeat: a manual change is reverted within it.
const aclTick = 30 * time.Second

var hashOf = harness.PasswordHash

func role(name string, cats []string, cmds ...v1.CommandRule) *v1.ValkeyRole {
	r := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range cats {
		r.Spec.Categories = append(r.Spec.Categories, v1.CategoryRule{Name: c, Access: v1.RuleAllow})
	}
	r.Spec.Commands = cmds
	return r
}

func bind(user string, passwords []string, perms ...v1.ACLPermission) v1.ACLBinding {
	b := v1.ACLBinding{Username: user, Permissions: perms}
	for _, pw := range passwords {
		b.PasswordHashes = append(b.PasswordHashes, hashOf(pw))
	}
	return b
}

func permit(roleRef, pattern string, access v1.KeyAccess) v1.ACLPermission {
	return v1.ACLPermission{RoleRef: roleRef, Keys: []v1.KeyPattern{{Pattern: pattern, Access: access}}}
}

// nodeDo runs one command on one node as user (no user: no AUTH), on a connection of its own.
// A NOAUTH/WRONGPASS at connect is returned as the error.
func nodeDo(p corev1.Pod, user, pw string, args ...string) (string, error) {
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress: []string{addr(p)}, Username: user, Password: pw,
		ForceSingleClient: true, DisableCache: true, DisableRetry: true,
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if err := res.Error(); valkeygo.IsValkeyNil(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	if s, err := res.ToString(); err == nil {
		return s, nil
	}
	// A reply that is not text (CONFIG GET's map), as text.
	m, err := res.AsStrMap()
	return fmt.Sprint(m), err
}

// expectation checks one reply.
type expectation func(string, error) bool

func allowed(_ string, err error) bool {
	// Redirected or refused on a replica is not a permission error: the ACL check comes first.
	return err == nil || strings.HasPrefix(err.Error(), "MOVED") || strings.HasPrefix(err.Error(), "READONLY")
}
func errPrefix(prefix string) expectation {
	return func(_ string, err error) bool { return err != nil && strings.Contains(err.Error(), prefix) }
}

var (
	noperm   = errPrefix("NOPERM")
	refused  = errPrefix("WRONGPASS")
	noauth   = errPrefix("NOAUTH")
	answered = func(s string, err error) bool { return err == nil }
)

type nodeCheck struct {
	user, pw string
	args     []string
	want     expectation
	what     string
}

// onEveryNode waits until every check holds on every running node of every cluster and
// returns how long that took.
func onEveryNode(t *testing.T, what string, vcs []*v1.ValkeyCluster, checks ...nodeCheck) time.Duration {
	t.Helper()
	start := time.Now()
	lastMiss := ""
	for {
		var problem string
		nodes := 0
		for _, vc := range vcs {
			for _, p := range clusterPods(t, vc) {
				nodes++
				for _, c := range checks {
					if s, err := nodeDo(p, c.user, c.pw, c.args...); !c.want(s, err) {
						problem = fmt.Sprintf("%s on %s: %s %v replied %q, %v", c.what, p.Name, c.user, c.args, s, err)
						break
					}
				}
				if problem != "" {
					break
				}
			}
			if problem != "" {
				break
			}
		}
		if problem == "" && nodes > 0 {
			d := time.Since(start)
			t.Logf("%s: on all %d nodes after %s", what, nodes, d.Round(100*time.Millisecond))
			if lastMiss != "" {
				t.Logf("%s: the last miss before: %s", what, lastMiss)
			}
			return d
		}
		if problem != "" {
			lastMiss = time.Now().Format("15:04:05.000 ") + problem
		}
		if time.Since(start) > aclTimeout {
			t.Fatalf("%s: not on every node within %s: %s", what, aclTimeout, problem)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func updateCluster(t *testing.T, vc *v1.ValkeyCluster, mutate func(*v1.ValkeyCluster)) {
	t.Helper()
	for range 10 {
		cur := currentCluster(t, vc)
		mutate(cur)
		if err := k8s.Update(context.Background(), cur); err == nil {
			return
		}
	}
	t.Fatal("could not update the cluster")
}

func updateObj[T client.Object](t *testing.T, obj T, mutate func(T)) {
	t.Helper()
	for range 10 {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		mutate(obj)
		if err := k8s.Update(context.Background(), obj); err == nil {
			return
		}
	}
	t.Fatalf("could not update %s", obj.GetName())
}

// waitStateMessage waits for vc's state and status.message.
func waitStateMessage(t *testing.T, vc *v1.ValkeyCluster, state v1.State, message string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cur := currentCluster(t, vc)
		if cur.Status.State == state && cur.Status.Message == message {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s message %q, want %s %q", cur.Status.State, cur.Status.Message, state, message)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestACL drives the ACL of a 3×1 cluster through the documented life of a user, checking every
// step on all six nodes, and a config-level binding shared with a second cluster. It starts on
// Valkey 8.0.1 (ACL SETUSER), rotates a password while an upgrade to 9.1.2 rolls, and ends on
// 9.1.2 (ACL LOAD of the mounted file).
func TestACL(t *testing.T) {
	lane(t)
	ns := "acl"
	setupNamespace(t, ns)
	cfg := newConfig(ns+"-config", ns+"-image")
	wait := v1.CommandRule{Name: "wait", Access: v1.RuleAllow}
	rw := role("acl-rw", []string{"read", "write"}, wait, v1.CommandRule{Name: "flushall", Access: v1.RuleDeny})
	create(t, newImage(ns+"-image"), cfg, rw, role("acl-ro", []string{"read"}), role("acl-wo", []string{"write"}),
		role("acl-admin", []string{"all"}))
	vc := newCluster(ns, "vc", cfg.Name)
	vc2 := newCluster(ns, "vc2", cfg.Name, withShards(1), withReplicas(0))
	create(t, vc, vc2)
	for _, c := range []*v1.ValkeyCluster{vc, vc2} {
		if _, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(c), v1.StateActive, formTimeout); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, vc, 3, 1, nil, time.Minute)
	both, one := []*v1.ValkeyCluster{vc, vc2}, []*v1.ValkeyCluster{vc}

	// No binding anywhere: the default user is open.
	onEveryNode(t, "default user open", both, nodeCheck{"", "", []string{"SET", "x", "1"}, allowed, "default"})

	// A user added: AUTH works, its pattern works, outside it and a denied command are NOPERM,
	// and the default user is off.
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = []v1.ACLBinding{bind("app", []string{"h1"}, permit("acl-rw", "app:*", v1.KeyAccessReadWrite))}
	})
	onEveryNode(t, "user added", one,
		nodeCheck{"app", "h1", []string{"SET", "app:k", "v"}, allowed, "set in pattern"},
		nodeCheck{"app", "h1", []string{"GET", "app:k"}, allowed, "get in pattern"},
		nodeCheck{"app", "h1", []string{"SET", "other:k", "v"}, noperm, "set outside pattern"},
		nodeCheck{"app", "h1", []string{"GET", "other:k"}, noperm, "get outside pattern"},
		nodeCheck{"app", "h1", []string{"FLUSHALL"}, noperm, "denied command"},
		nodeCheck{"", "", []string{"PING"}, noauth, "default off"})
	// vc2 has no binding: its default user stays open.
	onEveryNode(t, "other cluster untouched", []*v1.ValkeyCluster{vc2}, nodeCheck{"", "", []string{"PING"}, answered, "default"})

	// Rotation [h1] → [h1, h2] → [h2], with a client that keeps writing.
	opts := writerOptions(t, vc, "app:")
	opts.Username, opts.Password = "app", "h1"
	w1, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if err := w1.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL[0].PasswordHashes = []string{hashOf("h1"), hashOf("h2")} })
	onEveryNode(t, "second password", one,
		nodeCheck{"app", "h1", []string{"PING"}, answered, "old password"},
		nodeCheck{"app", "h2", []string{"PING"}, answered, "new password"})
	opts.Password = "h2"
	w2, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	w1.Stop()
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL[0].PasswordHashes = []string{hashOf("h2")} })
	onEveryNode(t, "old password removed", one,
		nodeCheck{"app", "h1", []string{"PING"}, refused, "old password"},
		nodeCheck{"app", "h2", []string{"PING"}, answered, "new password"})
	if err := w2.WaitAcked(20, time.Minute); err != nil {
		t.Fatalf("the client on the new password stopped working: %v", err)
	}
	w2.Stop()
	for _, w := range []*harness.Writer{w1, w2} {
		r, err := w.Report(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Acked == 0 || r.ReadErrors > 0 || r.LostReplicated > 0 {
			t.Fatalf("writer across the rotation: %s", r)
		}
		for _, s := range r.Slots {
			if s.Failures > 0 {
				t.Errorf("slot %d refused %d writes across the rotation (last: %s)", s.Slot, s.Failures, s.LastError)
			}
		}
	}

	// A role loses write: writes are refused everywhere; given back, they work again.
	updateObj(t, rw, func(r *v1.ValkeyRole) { r.Spec.Categories = r.Spec.Categories[:1] })
	onEveryNode(t, "role lost write", one,
		nodeCheck{"app", "h2", []string{"SET", "app:k", "v"}, noperm, "write"},
		nodeCheck{"app", "h2", []string{"GET", "app:k"}, allowed, "read"})
	updateObj(t, rw, func(r *v1.ValkeyRole) {
		r.Spec.Categories = append(r.Spec.Categories, v1.CategoryRule{Name: "write", Access: v1.RuleAllow})
	})
	onEveryNode(t, "role got write back", one, nodeCheck{"app", "h2", []string{"SET", "app:k", "v"}, allowed, "write"})

	// Selectors: read on a:* plus write on b:* cannot write a:*.
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, bind("split", []string{"s"},
			permit("acl-ro", "a:*", v1.KeyAccessRead), permit("acl-wo", "b:*", v1.KeyAccessReadWrite)),
			bind("admin", []string{"adm"}, permit("acl-admin", "*", v1.KeyAccessReadWrite)))
	})
	onEveryNode(t, "selector user", one,
		nodeCheck{"split", "s", []string{"GET", "a:1"}, allowed, "read a"},
		nodeCheck{"split", "s", []string{"SET", "a:1", "v"}, noperm, "write a"},
		nodeCheck{"split", "s", []string{"SET", "b:1", "v"}, allowed, "write b"},
		nodeCheck{"split", "s", []string{"GET", "c:1"}, noperm, "read c"})

	// A manual ACL SETUSER on one node is reverted by the next pass (at most a tick).
	manualSetUserReverted(t, "8.x", clusterPods(t, vc)[0], "s", true)

	// A config-level binding reaches both clusters that use the config.
	updateObj(t, cfg, func(c *v1.ValkeyConfig) {
		c.Spec.ACL = []v1.ACLBinding{bind("platform", []string{"p"}, permit("acl-ro", "p:*", v1.KeyAccessRead))}
	})
	onEveryNode(t, "config-level user", both,
		nodeCheck{"platform", "p", []string{"GET", "p:1"}, allowed, "read p"},
		nodeCheck{"platform", "p", []string{"SET", "p:1", "v"}, noperm, "write p"},
		nodeCheck{"", "", []string{"PING"}, noauth, "default off"})

	// A ValkeyRole edit reaches every cluster that binds it (here both, through the config):
	// acl-ro denies GET, then allows it again.
	ro := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: "acl-ro"}}
	updateObj(t, ro, func(r *v1.ValkeyRole) {
		r.Spec.Commands = []v1.CommandRule{{Name: "get", Access: v1.RuleDeny}}
	})
	onEveryNode(t, "role edit on both clusters", both, nodeCheck{"platform", "p", []string{"GET", "p:1"}, noperm, "get p"})
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = nil })
	onEveryNode(t, "role edit undone on both clusters", both, nodeCheck{"platform", "p", []string{"GET", "p:1"}, allowed, "get p"})

	// A node that cannot be reached (a replica, frozen): `ACL LOAD failed, will retry next tick`
	// at WARN with its pod, while the other nodes get the change; thawed, it catches up.
	frozen := podWithRole(t, vc, v1.NodeRoleReplica)
	if err := cluster.Kubelet.FreezePod(ns, frozen); err != nil {
		t.Fatal(err)
	}
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = []v1.CommandRule{{Name: "strlen", Access: v1.RuleDeny}} })
	deadline := time.Now().Add(aclTimeout)
	for !loggedFor(t, logging.MsgACLLoadFailed, ns, frozen) {
		if time.Now().After(deadline) {
			_ = cluster.Kubelet.ThawPod(ns, frozen)
			t.Fatalf("no %q line with pod %s while it was frozen", logging.MsgACLLoadFailed, frozen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range clusterPods(t, vc) {
		if p.Name == frozen {
			continue
		}
		if _, err := nodeDo(p, "platform", "p", "STRLEN", "p:1"); !noperm("", err) {
			t.Errorf("%s: STRLEN not denied while %s was frozen: %v", p.Name, frozen, err)
		}
	}
	if err := cluster.Kubelet.ThawPod(ns, frozen); err != nil {
		t.Fatal(err)
	}
	onEveryNode(t, "the frozen node caught up", one, nodeCheck{"platform", "p", []string{"STRLEN", "p:1"}, noperm, "strlen p"})
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = nil })

	// A username bound at both levels: Invalid with the docs' message; the nodes keep their ACL.
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, bind("platform", []string{"x"}, permit("acl-rw", "x:*", v1.KeyAccessReadWrite)))
	})
	waitStateMessage(t, vc, v1.StateInvalid, `duplicate username "platform" in merged ACL bindings`)
	onEveryNode(t, "ACL kept while Invalid", one, nodeCheck{"platform", "p", []string{"PING"}, answered, "platform"})
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL = c.Spec.ACL[:len(c.Spec.ACL)-1] })
	waitStateMessage(t, vc, v1.StateActive, "")

	// A missing role: Invalid with the docs' message, until the role exists.
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, bind("late", []string{"l"}, permit("acl-late", "l:*", v1.KeyAccessReadWrite)))
	})
	waitStateMessage(t, vc, v1.StateInvalid, `ValkeyRole "acl-late" not found (referenced by user "late")`)
	create(t, role("acl-late", []string{"read", "write"}))
	waitStateMessage(t, vc, v1.StateActive, "")
	onEveryNode(t, "user of the late role", one, nodeCheck{"late", "l", []string{"SET", "l:1", "v"}, allowed, "write l"})

	// A role naming a command Valkey lacks: Invalid with the role and command named; the nodes
	// keep their ACL; removing the binding brings the cluster back.
	create(t, role("acl-bad", []string{"read"}, v1.CommandRule{Name: "nosuchcmd", Access: v1.RuleAllow}))
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, bind("bad", []string{"b"}, permit("acl-bad", "b:*", v1.KeyAccessRead)))
	})
	waitStateMessage(t, vc, v1.StateInvalid, `ValkeyRole "acl-bad": unknown command "nosuchcmd" (neither Valkey 8.0 nor 9.1 has it)`)
	onEveryNode(t, "ACL kept while a role is unknown", one, nodeCheck{"late", "l", []string{"PING"}, answered, "late"})
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL = c.Spec.ACL[:len(c.Spec.ACL)-1] })
	waitStateMessage(t, vc, v1.StateActive, "")

	// The user removed: AUTH refused everywhere.
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = []v1.ACLBinding{c.Spec.ACL[1], c.Spec.ACL[2], c.Spec.ACL[3]} // split, admin, late
	})
	onEveryNode(t, "user removed", one, nodeCheck{"app", "h2", []string{"PING"}, refused, "removed user"})

	// After all that, with the default user off: the operator still manages the cluster and
	// replication works (Ready means every replica's link is up), and the system users cannot
	// read or write a key.
	waitReady(t, vc, 3, 1, nil, time.Minute)
	op := operatorCreds(t, vc)
	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v1.OperatorAuthSecretName(vc.Name)}, &s); err != nil {
		t.Fatal(err)
	}
	repl := string(s.Data["repl-password"])
	if repl == "" {
		t.Fatal("no repl-password in the operator's credential Secret")
	}
	onEveryNode(t, "system users touch no key", one,
		nodeCheck{op.Username, op.Password, []string{"GET", "app:k"}, noperm, "operator get"},
		nodeCheck{op.Username, op.Password, []string{"SET", "app:k", "v"}, noperm, "operator set"},
		// The settings applied live are read back (liveconf): CONFIG GET is granted, nothing
		// else of CONFIG but SET.
		nodeCheck{op.Username, op.Password, []string{"CONFIG", "GET", "maxmemory"}, answered, "operator config get"},
		nodeCheck{op.Username, op.Password, []string{"CONFIG", "RESETSTAT"}, noperm, "operator config resetstat"},
		nodeCheck{op.Username, op.Password, []string{"FLUSHALL"}, noperm, "operator flushall"},
		nodeCheck{"_momento_repl", repl, []string{"GET", "app:k"}, noperm, "repl get"},
		nodeCheck{"_momento_repl", repl, []string{"SET", "app:k", "v"}, noperm, "repl set"},
		nodeCheck{"_momento_repl", repl, []string{"CLUSTER", "NODES"}, noperm, "repl cluster nodes"},
		nodeCheck{"", "", []string{"PING"}, noauth, "default off"})

	// A primary killed: its replacement enforces the current ACL as soon as it runs.
	victim := podWithRole(t, vc, v1.NodeRolePrimary)
	if err := cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	waitReady(t, vc, 3, 1, map[string]bool{victim: true}, 2*time.Minute)
	onEveryNode(t, "after a primary was replaced", one,
		nodeCheck{"split", "s", []string{"SET", "a:1", "v"}, noperm, "write a"},
		nodeCheck{"split", "s", []string{"SET", "b:1", "v"}, allowed, "write b"},
		nodeCheck{"", "", []string{"PING"}, noauth, "default off"})

	// A rotation while the cluster is Upgrading completes. The upgrade is 8.0.1 → 9.1.2, so the
	// old nodes get the change by ACL SETUSER and the new ones by ACL LOAD of their mounted file:
	// both paths at once, and at the end every node enforces the file through ACL LOAD.
	nine := newImage(ns + "-image9")
	nine.Spec.Tag, nine.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
	create(t, nine)
	before := podNameSet(t, vc)
	updateObj(t, cfg, func(c *v1.ValkeyConfig) { c.Spec.ImageRef = nine.Name })
	if _, err := harness.WaitState(context.Background(), k8s, client.ObjectKeyFromObject(vc), v1.StateUpgrading, time.Minute); err != nil {
		t.Fatal(err)
	}
	updateCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL[0].PasswordHashes = []string{hashOf("s2")} })
	rotated := []nodeCheck{
		{"split", "s2", []string{"SET", "b:1", "v"}, allowed, "new password"},
		{"split", "s", []string{"PING"}, refused, "old password"},
		{"split", "s2", []string{"SET", "a:1", "v"}, noperm, "write a"},
		{"", "", []string{"PING"}, noauth, "default off"},
	}
	if cur := currentCluster(t, vc); cur.Status.State != v1.StateUpgrading {
		t.Logf("the rotation reached the API while the cluster was %s (the roll was quick)", cur.Status.State)
	}
	onEveryNode(t, "rotated while upgrading", one, rotated...)
	waitRolled(t, vc, 3, 1, before, rollTimeout)
	for _, p := range clusterPods(t, vc) {
		if v := valkeyVersion(t, vc, p); v != localcluster.Valkey9Version {
			t.Errorf("%s: valkey_version %s after the upgrade", p.Name, v)
		}
	}
	onEveryNode(t, "rotation kept after the upgrade", one, rotated...)

	// On Valkey 9 (ACL LOAD of the mounted file): a role edit reaches every node once the
	// kubelet has refreshed the Secret volume, and a manual ACL SETUSER is reverted.
	updateObj(t, rw, func(r *v1.ValkeyRole) { r.Spec.Categories = r.Spec.Categories[:1] })
	updateCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, bind("app", []string{"h3"}, permit("acl-rw", "app:*", v1.KeyAccessReadWrite)))
	})
	onEveryNode(t, "9.x: user added with a role that lost write", one,
		nodeCheck{"app", "h3", []string{"GET", "app:k"}, allowed, "read"},
		nodeCheck{"app", "h3", []string{"SET", "app:k", "v"}, noperm, "write"})
	manualSetUserReverted(t, "9.x", clusterPods(t, vc)[0], "s2", false)
	waitReady(t, vc, 3, 1, nil, time.Minute)
	onEveryNode(t, "9.x: system users touch no key", one,
		nodeCheck{op.Username, op.Password, []string{"GET", "app:k"}, noperm, "operator get"},
		nodeCheck{"_momento_repl", repl, []string{"SET", "app:k", "v"}, noperm, "repl set"})

	// The log: the tick at INFO with cluster_name under operator::controller::acl, `ACL applied`
	// per node, and never a password or a hash.
	ticks, applied := 0, 0
	for _, l := range parseLog(t, operator.Logs()) {
		if !strings.HasSuffix(l.ref(), "."+ns) {
			continue
		}
		switch l.message() {
		case logging.MsgACLTick:
			if l.Level != "INFO" || l.Target != logging.TargetACL || l.Fields["cluster_name"] == nil {
				t.Errorf("tick line: %+v", l)
			}
			ticks++
		case logging.MsgACLApplied:
			if l.Fields["pod"] == nil {
				t.Errorf("applied line without pod: %+v", l)
			}
			applied++
		}
	}
	if ticks == 0 || applied == 0 {
		t.Errorf("%d ACL ticks and %d applied lines in the log", ticks, applied)
	}
	logs := operator.Logs()
	for _, secret := range []string{"h1", "h2", hashOf("h1"), hashOf("h2"), hashOf("s2"), hashOf("p"), op.Password, repl} {
		if len(secret) > 2 && bytes.Contains(logs, []byte(secret)) {
			t.Errorf("a password or hash is in the log stream")
		}
	}
}

// manualSetUserReverted widens user split (password pw) by hand on pod, as user admin, checks
// that it took (when checkTook: not while catch-up passes run every second, which may revert it
// first), and waits until the operator has reverted it: at most a tick.
func manualSetUserReverted(t *testing.T, what string, pod corev1.Pod, pw string, checkTook bool) {
	t.Helper()
	if _, err := nodeDo(pod, "admin", "adm", "ACL", "SETUSER", "split", "on", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeDo(pod, "split", pw, "SET", "a:1", "v"); checkTook && !allowed("", err) {
		t.Fatalf("%s: the manual ACL SETUSER did not take: %v", what, err)
	}
	start := time.Now()
	for {
		if _, err := nodeDo(pod, "split", pw, "SET", "a:1", "v"); noperm("", err) {
			t.Logf("%s: manual ACL SETUSER reverted after %s", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > aclTick+15*time.Second {
			t.Fatalf("%s: the manual ACL SETUSER was not reverted within a tick", what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
