package acl

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

func allowed(_ string, err error) bool {
	// Redirected or refused on a replica is not a permission error: the ACL check comes first.
	return err == nil || strings.HasPrefix(err.Error(), "MOVED") || strings.HasPrefix(err.Error(), "READONLY")
}

type nodeCheck struct {
	user, pw string
	args     []string
	want     harness.Expectation
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
			for _, p := range harness.Pods(t, vc) {
				nodes++
				for _, c := range checks {
					if s, err := harness.NodeDo(p, c.user, c.pw, c.args...); !c.want(s, err) {
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

func updateObj[T client.Object](t *testing.T, obj T, mutate func(T)) {
	t.Helper()
	for range 10 {
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		mutate(obj)
		if err := harness.K8s.Update(context.Background(), obj); err == nil {
			return
		}
	}
	t.Fatalf("could not update %s", obj.GetName())
}

// TestACL drives the ACL of a 3×1 cluster through the documented life of a user, checking every
// step on all six nodes, and a config-level binding shared with a second cluster. It starts on
// Valkey 8.0.1 (ACL SETUSER), rotates a password while an upgrade to 9.1.2 rolls, and ends on
// 9.1.2 (ACL LOAD of the mounted file).
func TestACL(t *testing.T) {
	ns := "acl"
	harness.SetupNamespace(t, ns)
	cfg := harness.NewConfig(ns+"-config", ns+"-image")
	wait := v1.CommandRule{Name: "wait", Access: v1.RuleAllow}
	rw := harness.Role("acl-rw", []string{"read", "write"}, wait, v1.CommandRule{Name: "flushall", Access: v1.RuleDeny})
	harness.Create(t, harness.NewImage(ns+"-image"), cfg, rw, harness.Role("acl-ro", []string{"read"}), harness.Role("acl-wo", []string{"write"}),
		harness.Role("acl-admin", []string{"all"}))
	vc := harness.NewCluster(ns, "vc", cfg.Name)
	vc2 := harness.NewCluster(ns, "vc2", cfg.Name, harness.WithShards(1), harness.WithReplicas(0))
	harness.Create(t, vc, vc2)
	for _, c := range []*v1.ValkeyCluster{vc, vc2} {
		if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(c), v1.StateActive, harness.FormTimeout); err != nil {
			t.Fatal(err)
		}
	}
	harness.WaitReady(t, vc, 3, 1, nil, time.Minute)
	both, one := []*v1.ValkeyCluster{vc, vc2}, []*v1.ValkeyCluster{vc}

	// No binding anywhere: the default user is open.
	onEveryNode(t, "default user open", both, nodeCheck{"", "", []string{"SET", "x", "1"}, allowed, "default"})

	// A user added: AUTH works, its pattern works, outside it and a denied command are NOPERM,
	// and the default user is off.
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = []v1.ACLBinding{harness.Bind("app", []string{"h1"}, harness.Permit("acl-rw", "app:*", v1.KeyAccessReadWrite))}
	})
	onEveryNode(t, "user added", one,
		nodeCheck{"app", "h1", []string{"SET", "app:k", "v"}, allowed, "set in pattern"},
		nodeCheck{"app", "h1", []string{"GET", "app:k"}, allowed, "get in pattern"},
		nodeCheck{"app", "h1", []string{"SET", "other:k", "v"}, harness.Noperm, "set outside pattern"},
		nodeCheck{"app", "h1", []string{"GET", "other:k"}, harness.Noperm, "get outside pattern"},
		nodeCheck{"app", "h1", []string{"FLUSHALL"}, harness.Noperm, "denied command"},
		nodeCheck{"", "", []string{"PING"}, harness.Noauth, "default off"})
	// vc2 has no binding: its default user stays open.
	onEveryNode(t, "other cluster untouched", []*v1.ValkeyCluster{vc2}, nodeCheck{"", "", []string{"PING"}, harness.Answered, "default"})

	// Rotation [h1] → [h1, h2] → [h2], with a client that keeps writing.
	opts := harness.ClusterWriterOptions(t, vc, "app:")
	opts.Username, opts.Password = "app", "h1"
	w1, err := harness.StartWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if err := w1.WaitAcked(20, time.Minute); err != nil {
		t.Fatal(err)
	}
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL[0].PasswordHashes = []string{harness.PasswordHash("h1"), harness.PasswordHash("h2")}
	})
	onEveryNode(t, "second password", one,
		nodeCheck{"app", "h1", []string{"PING"}, harness.Answered, "old password"},
		nodeCheck{"app", "h2", []string{"PING"}, harness.Answered, "new password"})
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
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL[0].PasswordHashes = []string{harness.PasswordHash("h2")} })
	onEveryNode(t, "old password removed", one,
		nodeCheck{"app", "h1", []string{"PING"}, harness.Refused, "old password"},
		nodeCheck{"app", "h2", []string{"PING"}, harness.Answered, "new password"})
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
		nodeCheck{"app", "h2", []string{"SET", "app:k", "v"}, harness.Noperm, "write"},
		nodeCheck{"app", "h2", []string{"GET", "app:k"}, allowed, "read"})
	updateObj(t, rw, func(r *v1.ValkeyRole) {
		r.Spec.Categories = append(r.Spec.Categories, v1.CategoryRule{Name: "write", Access: v1.RuleAllow})
	})
	onEveryNode(t, "role got write back", one, nodeCheck{"app", "h2", []string{"SET", "app:k", "v"}, allowed, "write"})

	// Selectors: read on a:* plus write on b:* cannot write a:*.
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, harness.Bind("split", []string{"s"},
			harness.Permit("acl-ro", "a:*", v1.KeyAccessRead), harness.Permit("acl-wo", "b:*", v1.KeyAccessReadWrite)),
			harness.Bind("admin", []string{"adm"}, harness.Permit("acl-admin", "*", v1.KeyAccessReadWrite)))
	})
	onEveryNode(t, "selector user", one,
		nodeCheck{"split", "s", []string{"GET", "a:1"}, allowed, "read a"},
		nodeCheck{"split", "s", []string{"SET", "a:1", "v"}, harness.Noperm, "write a"},
		nodeCheck{"split", "s", []string{"SET", "b:1", "v"}, allowed, "write b"},
		nodeCheck{"split", "s", []string{"GET", "c:1"}, harness.Noperm, "read c"})

	// A manual ACL SETUSER on one node is reverted by the next pass (at most a tick).
	manualSetUserReverted(t, "8.x", harness.Pods(t, vc)[0], "s", true)

	// A config-level binding reaches both clusters that use the config.
	updateObj(t, cfg, func(c *v1.ValkeyConfig) {
		c.Spec.ACL = []v1.ACLBinding{harness.Bind("platform", []string{"p"}, harness.Permit("acl-ro", "p:*", v1.KeyAccessRead))}
	})
	onEveryNode(t, "config-level user", both,
		nodeCheck{"platform", "p", []string{"GET", "p:1"}, allowed, "read p"},
		nodeCheck{"platform", "p", []string{"SET", "p:1", "v"}, harness.Noperm, "write p"},
		nodeCheck{"", "", []string{"PING"}, harness.Noauth, "default off"})

	// A ValkeyRole edit reaches every cluster that binds it (here both, through the config):
	// acl-ro denies GET, then allows it again.
	ro := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: "acl-ro"}}
	updateObj(t, ro, func(r *v1.ValkeyRole) {
		r.Spec.Commands = []v1.CommandRule{{Name: "get", Access: v1.RuleDeny}}
	})
	onEveryNode(t, "role edit on both clusters", both, nodeCheck{"platform", "p", []string{"GET", "p:1"}, harness.Noperm, "get p"})
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = nil })
	onEveryNode(t, "role edit undone on both clusters", both, nodeCheck{"platform", "p", []string{"GET", "p:1"}, allowed, "get p"})

	// A node that cannot be reached (a replica, frozen): `ACL LOAD failed, will retry next tick`
	// at WARN with its pod, while the other nodes get the change; thawed, it catches up.
	frozen := harness.PodWithRole(t, vc, v1.NodeRoleReplica)
	if err := harness.Cluster.Kubelet.FreezePod(ns, frozen); err != nil {
		t.Fatal(err)
	}
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = []v1.CommandRule{{Name: "strlen", Access: v1.RuleDeny}} })
	if harness.Poll(t.Context(), aclTimeout, func() string {
		if !harness.LoggedFor(t, logging.MsgACLLoadFailed, ns, frozen) {
			return "no line"
		}
		return ""
	}) != "" {
		_ = harness.Cluster.Kubelet.ThawPod(ns, frozen)
		t.Fatalf("no %q line with pod %s while it was frozen", logging.MsgACLLoadFailed, frozen)
	}
	for _, p := range harness.Pods(t, vc) {
		if p.Name == frozen {
			continue
		}
		if _, err := harness.NodeDo(p, "platform", "p", "STRLEN", "p:1"); !harness.Noperm("", err) {
			t.Errorf("%s: STRLEN not denied while %s was frozen: %v", p.Name, frozen, err)
		}
	}
	if err := harness.Cluster.Kubelet.ThawPod(ns, frozen); err != nil {
		t.Fatal(err)
	}
	onEveryNode(t, "the frozen node caught up", one, nodeCheck{"platform", "p", []string{"STRLEN", "p:1"}, harness.Noperm, "strlen p"})
	updateObj(t, ro, func(r *v1.ValkeyRole) { r.Spec.Commands = nil })

	// A username bound at both levels: Invalid with the docs' message; the nodes keep their ACL.
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, harness.Bind("platform", []string{"x"}, harness.Permit("acl-rw", "x:*", v1.KeyAccessReadWrite)))
	})
	harness.WaitStateMessage(t, vc, v1.StateInvalid, `duplicate username "platform" in merged ACL bindings`)
	onEveryNode(t, "ACL kept while Invalid", one, nodeCheck{"platform", "p", []string{"PING"}, harness.Answered, "platform"})
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL = c.Spec.ACL[:len(c.Spec.ACL)-1] })
	harness.WaitStateMessage(t, vc, v1.StateActive, "")

	// A missing role: Invalid with the docs' message, until the role exists.
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, harness.Bind("late", []string{"l"}, harness.Permit("acl-late", "l:*", v1.KeyAccessReadWrite)))
	})
	harness.WaitStateMessage(t, vc, v1.StateInvalid, `ValkeyRole "acl-late" not found (referenced by user "late")`)
	harness.Create(t, harness.Role("acl-late", []string{"read", "write"}))
	harness.WaitStateMessage(t, vc, v1.StateActive, "")
	onEveryNode(t, "user of the late role", one, nodeCheck{"late", "l", []string{"SET", "l:1", "v"}, allowed, "write l"})

	// A role naming a command, or a category (a module's, admitted as the original admits it),
	// that the nodes do not know: Invalid with the role, the name and a node named, from the
	// node's own COMMAND LIST / ACL CAT; the nodes keep their ACL; removing the binding brings the
	// cluster back.
	harness.Create(t, harness.Role("acl-bad", []string{"read"}, v1.CommandRule{Name: "nosuchcmd", Access: v1.RuleAllow}))
	harness.Create(t, harness.Role("acl-json", []string{"read", "json"}))
	for _, bad := range []struct{ role, want string }{
		{"acl-bad", `ValkeyRole "acl-bad": command "nosuchcmd" is not known to node ` + vc.Name + `-`},
		{"acl-json", `ValkeyRole "acl-json": category "json" is not known to node ` + vc.Name + `-`},
	} {
		harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
			c.Spec.ACL = append(c.Spec.ACL, harness.Bind("bad", []string{"b"}, harness.Permit(bad.role, "b:*", v1.KeyAccessRead)))
		})
		harness.WaitFor(t, "Invalid naming "+bad.role+"'s unknown name and a node", time.Minute, func() string {
			cur := harness.CurrentCluster(t, vc)
			if cur.Status.State == v1.StateInvalid && strings.HasPrefix(cur.Status.Message, bad.want) {
				return ""
			}
			return fmt.Sprintf("state %s message %q", cur.Status.State, cur.Status.Message)
		})
		onEveryNode(t, "ACL kept while a role is unknown", one, nodeCheck{"late", "l", []string{"PING"}, harness.Answered, "late"})
		onEveryNode(t, "the unknown name never reached a node", one, nodeCheck{"bad", "b", []string{"PING"}, harness.Refused, "bad"})
		harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL = c.Spec.ACL[:len(c.Spec.ACL)-1] })
		harness.WaitStateMessage(t, vc, v1.StateActive, "")
	}

	// The user removed: AUTH refused everywhere.
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = []v1.ACLBinding{c.Spec.ACL[1], c.Spec.ACL[2], c.Spec.ACL[3]} // split, admin, late
	})
	onEveryNode(t, "user removed", one, nodeCheck{"app", "h2", []string{"PING"}, harness.Refused, "removed user"})

	// After all that, with the default user off: the operator still manages the cluster and
	// replication works (Ready means every replica's link is up), and the system users cannot
	// read or write a key.
	harness.WaitReady(t, vc, 3, 1, nil, time.Minute)
	op := harness.Creds(t, vc)
	var s corev1.Secret
	if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v1.OperatorAuthSecretName(vc.Name)}, &s); err != nil {
		t.Fatal(err)
	}
	repl := string(s.Data["repl-password"])
	if repl == "" {
		t.Fatal("no repl-password in the operator's credential Secret")
	}
	onEveryNode(t, "system users touch no key", one,
		nodeCheck{op.Username, op.Password, []string{"GET", "app:k"}, harness.Noperm, "operator get"},
		nodeCheck{op.Username, op.Password, []string{"SET", "app:k", "v"}, harness.Noperm, "operator set"},
		// The settings applied live are read back (liveconf): CONFIG GET is granted, nothing
		// else of CONFIG but SET.
		nodeCheck{op.Username, op.Password, []string{"CONFIG", "GET", "maxmemory"}, harness.Answered, "operator config get"},
		nodeCheck{op.Username, op.Password, []string{"CONFIG", "RESETSTAT"}, harness.Noperm, "operator config resetstat"},
		nodeCheck{op.Username, op.Password, []string{"FLUSHALL"}, harness.Noperm, "operator flushall"},
		nodeCheck{"_momento_repl", repl, []string{"GET", "app:k"}, harness.Noperm, "repl get"},
		nodeCheck{"_momento_repl", repl, []string{"SET", "app:k", "v"}, harness.Noperm, "repl set"},
		nodeCheck{"_momento_repl", repl, []string{"CLUSTER", "NODES"}, harness.Noperm, "repl cluster nodes"},
		nodeCheck{"", "", []string{"PING"}, harness.Noauth, "default off"})

	// A primary killed: its replacement enforces the current ACL as soon as it runs.
	victim := harness.PodWithRole(t, vc, v1.NodeRolePrimary)
	if err := harness.Cluster.Kubelet.KillPod(ns, victim); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, vc, 3, 1, map[string]bool{victim: true}, 2*time.Minute)
	onEveryNode(t, "after a primary was replaced", one,
		nodeCheck{"split", "s", []string{"SET", "a:1", "v"}, harness.Noperm, "write a"},
		nodeCheck{"split", "s", []string{"SET", "b:1", "v"}, allowed, "write b"},
		nodeCheck{"", "", []string{"PING"}, harness.Noauth, "default off"})

	// A rotation while the cluster is Upgrading completes. The upgrade is 8.0.1 → 9.1.2, so the
	// old nodes get the change by ACL SETUSER and the new ones by ACL LOAD of their mounted file:
	// both paths at once, and at the end every node enforces the file through ACL LOAD.
	nine := harness.NewImage(ns + "-image9")
	nine.Spec.Tag, nine.Spec.Version = localcluster.Valkey9Version, localcluster.Valkey9Version
	harness.Create(t, nine)
	before := harness.PodNameSet(t, vc)
	updateObj(t, cfg, func(c *v1.ValkeyConfig) { c.Spec.ImageRef = nine.Name })
	if _, err := harness.WaitState(context.Background(), harness.K8s, client.ObjectKeyFromObject(vc), v1.StateUpgrading, time.Minute); err != nil {
		t.Fatal(err)
	}
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) { c.Spec.ACL[0].PasswordHashes = []string{harness.PasswordHash("s2")} })
	rotated := []nodeCheck{
		{"split", "s2", []string{"SET", "b:1", "v"}, allowed, "new password"},
		{"split", "s", []string{"PING"}, harness.Refused, "old password"},
		{"split", "s2", []string{"SET", "a:1", "v"}, harness.Noperm, "write a"},
		{"", "", []string{"PING"}, harness.Noauth, "default off"},
	}
	if cur := harness.CurrentCluster(t, vc); cur.Status.State != v1.StateUpgrading {
		t.Logf("the rotation reached the API while the cluster was %s (the roll was quick)", cur.Status.State)
	}
	onEveryNode(t, "rotated while upgrading", one, rotated...)
	harness.WaitRolled(t, vc, 3, 1, before, harness.RollTimeout)
	for _, p := range harness.Pods(t, vc) {
		if v := harness.ValkeyVersion(t, vc, p); v != localcluster.Valkey9Version {
			t.Errorf("%s: valkey_version %s after the upgrade", p.Name, v)
		}
	}
	onEveryNode(t, "rotation kept after the upgrade", one, rotated...)

	// On Valkey 9 (ACL LOAD of the mounted file): a role edit reaches every node once the
	// kubelet has refreshed the Secret volume, and a manual ACL SETUSER is reverted.
	updateObj(t, rw, func(r *v1.ValkeyRole) { r.Spec.Categories = r.Spec.Categories[:1] })
	harness.EditCluster(t, vc, func(c *v1.ValkeyCluster) {
		c.Spec.ACL = append(c.Spec.ACL, harness.Bind("app", []string{"h3"}, harness.Permit("acl-rw", "app:*", v1.KeyAccessReadWrite)))
	})
	onEveryNode(t, "9.x: user added with a role that lost write", one,
		nodeCheck{"app", "h3", []string{"GET", "app:k"}, allowed, "read"},
		nodeCheck{"app", "h3", []string{"SET", "app:k", "v"}, harness.Noperm, "write"})
	manualSetUserReverted(t, "9.x", harness.Pods(t, vc)[0], "s2", false)
	harness.WaitReady(t, vc, 3, 1, nil, time.Minute)
	onEveryNode(t, "9.x: system users touch no key", one,
		nodeCheck{op.Username, op.Password, []string{"GET", "app:k"}, harness.Noperm, "operator get"},
		nodeCheck{"_momento_repl", repl, []string{"SET", "app:k", "v"}, harness.Noperm, "repl set"})

	// The log: the tick at INFO with cluster_name under operator::controller::acl, `ACL applied`
	// per node, and never a password or a hash.
	ticks, applied := 0, 0
	for _, l := range harness.ParseLog(t, harness.Op.Logs()) {
		if !strings.HasSuffix(l.Ref(), "."+ns) {
			continue
		}
		switch l.Message() {
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
	logs := harness.Op.Logs()
	for _, secret := range []string{"h1", "h2", harness.PasswordHash("h1"), harness.PasswordHash("h2"), harness.PasswordHash("s2"), harness.PasswordHash("p"), op.Password, repl} {
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
	if _, err := harness.NodeDo(pod, "admin", "adm", "ACL", "SETUSER", "split", "on", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.NodeDo(pod, "split", pw, "SET", "a:1", "v"); checkTook && !allowed("", err) {
		t.Fatalf("%s: the manual ACL SETUSER did not take: %v", what, err)
	}
	start := time.Now()
	for {
		if _, err := harness.NodeDo(pod, "split", pw, "SET", "a:1", "v"); harness.Noperm("", err) {
			t.Logf("%s: manual ACL SETUSER reverted after %s", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > aclTick+15*time.Second {
			t.Fatalf("%s: the manual ACL SETUSER was not reverted within a tick", what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
