package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/liveconf"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/metrics"
	"github.com/gomomento/valkey-operator/plan"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/slot"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/tlsmaterial/tlstest"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// The executor through the Valkey seam: each test runs one plan on a reconciler whose every
// connection reaches a scripted node (valkeytest), and says which commands the pass sends, to
// which node, in which order. The handshake valkey-go sends on each connection is left out.

// execCreds are the operator's credentials in these tests; migrateCreds acl.MigrationUser's.
var (
	execCreds    = valkey.Credentials{Username: acl.OperatorUser, Password: "op-pw"}
	migrateCreds = valkey.Credentials{Username: acl.MigrationUser, Password: "mig-pw"}
)

// execFixture is a cluster of pods p0, p1, ... at 10.0.0.1, 10.0.0.2, ..., each pod's node a
// scripted node of fleet, with node ids n0, n1, ...
type execFixture struct {
	r     *ValkeyClusterReconciler
	k8s   client.Client
	vc    *v1.ValkeyCluster
	obs   *observation
	fleet *valkeytest.Fleet
	logs  *observer.ObservedLogs
}

func newExecFixture(t *testing.T, pods int) *execFixture {
	t.Helper()
	pf := newPassFixture()
	for i := range pods {
		pf.withPod(fmt.Sprintf("p%d", i), podIP(i))
	}
	r, c := pf.build(t)
	fleet := valkeytest.New()
	r.conns.Dial = fleet.Dial
	t.Cleanup(func() { r.conns.Forget(clusterKey(pf.vc)) })
	obs := &observation{nodes: map[string]*v1.ValkeyNode{}, pods: map[string]*corev1.Pod{}}
	for _, o := range pf.objects {
		switch o := o.(type) {
		case *corev1.Pod:
			obs.pods[o.Name] = o
			fleet.Node(nodeAddr(o.Status.PodIP))
			i := len(obs.snapshot.Pods)
			obs.snapshot.Pods = append(obs.snapshot.Pods, fsm.Pod{Name: o.Name, IP: o.Status.PodIP, Node: &fsm.Node{Reachable: true, ID: fmt.Sprintf("n%d", i)}})
		case *v1.ValkeyNode:
			var vn v1.ValkeyNode
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), &vn); err != nil {
				t.Fatal(err)
			}
			obs.nodes[o.Name] = &vn
		}
	}
	return &execFixture{r: r, k8s: c, vc: pf.vc, obs: obs, fleet: fleet}
}

func podIP(i int) string { return fmt.Sprintf("10.0.0.%d", i+1) }

// node is the scripted node of pod i.
func (f *execFixture) node(i int) *valkeytest.Node { return f.fleet.Node(nodeAddr(podIP(i))) }

// run executes the plan of actions and returns its error.
func (f *execFixture) run(t *testing.T, actions ...plan.Action) error {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	f.logs = logs
	return f.r.execute(t.Context(), zap.New(core), f.vc, nil, execCreds, migrateCreds, f.obs, plan.Plan{Actions: actions})
}

// wantCommands fails the test unless the fleet received exactly want, in order ("i: CMD"
// stands for pod i's node).
func (f *execFixture) wantCommands(t *testing.T, want ...string) {
	t.Helper()
	for i, w := range want {
		var pod int
		if _, err := fmt.Sscanf(w, "%d:", &pod); err == nil {
			want[i] = nodeAddr(podIP(pod)) + strings.TrimPrefix(w, fmt.Sprintf("%d:", pod))
		}
	}
	if got := f.fleet.Commands(); !slices.Equal(got, want) {
		t.Fatalf("commands sent:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestExecuteSendsTheCommandsOfEachAction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(f *execFixture)
		action plan.Action
		want   []string
	}{
		{name: "meet", action: plan.Meet{Pod: "p0", IP: "10.0.0.2", NodeID: "n1"},
			want: []string{"0: CLUSTER MEET 10.0.0.2 6379 16379"}},
		{name: "add slots", action: plan.AddSlots{Pod: "p0", Slots: slot.Set{{Start: 0, End: 99}, {Start: 200, End: 200}}},
			want: []string{"0: CLUSTER ADDSLOTSRANGE 0 99 200 200"}},
		{name: "replicate", action: plan.Replicate{Pod: "p1", PrimaryID: "n0"},
			want: []string{"1: CLUSTER REPLICATE n0"}},
		{name: "takeover", action: plan.Takeover{Pod: "p1", PrimaryID: "n0"},
			want: []string{"1: CLUSTER FAILOVER TAKEOVER"}},
		{name: "forced failover, then the replica says it is a primary",
			script: func(f *execFixture) {
				f.node(1).On("CLUSTER NODES", valkeytest.Str(nodesLine(hexID(1), "10.0.0.2", "myself,master", "-")))
			},
			action: plan.FailoverForce{Pod: "p1", PrimaryID: "n0"},
			want:   []string{"1: CLUSTER FAILOVER FORCE", "1: CLUSTER NODES"}},
		{name: "a takeover for a lost primary whose FORCE would not take", action: plan.Takeover{Pod: "p1", PrimaryID: "n0", Reason: plan.TakeoverStaleView},
			want: []string{"1: CLUSTER FAILOVER TAKEOVER"}},
		{name: "graceful failover", action: plan.Failover{Pod: "p1", PrimaryID: "n0", Purpose: plan.Roll},
			want: []string{"1: CLUSTER FAILOVER"}},
		{name: "graceful failover of a replica promoted since",
			script: func(f *execFixture) {
				f.node(1).On("CLUSTER FAILOVER", valkeytest.Err("ERR You should send CLUSTER FAILOVER to a replica"))
			},
			action: plan.Failover{Pod: "p1", PrimaryID: "n0", Purpose: plan.HandOver},
			want:   []string{"1: CLUSTER FAILOVER"}},
		{name: "forget on every node that knows the id", action: plan.Forget{NodeID: "gone", Pods: []string{"p0", "p2", "p1"}},
			want: []string{"0: CLUSTER FORGET gone", "2: CLUSTER FORGET gone", "1: CLUSTER FORGET gone"}},
		{name: "close slots", action: plan.CloseSlots{Closes: []plan.CloseSlot{{Pod: "p0", Slot: 7, Owner: "n1"}, {Pod: "p1", Slot: 8}}},
			want: []string{"0: CLUSTER SETSLOT 7 NODE n1", "1: CLUSTER SETSLOT 8 STABLE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newExecFixture(t, 3)
			if tc.script != nil {
				tc.script(f)
			}
			if err := f.run(t, tc.action); err != nil {
				t.Fatal(err)
			}
			f.wantCommands(t, tc.want...)
		})
	}
}

// hexID is a node id as Valkey prints one, 40 hex digits, numbered i.
func hexID(i int) string { return fmt.Sprintf("%040x", i+1) }

// nodesLine is one CLUSTER NODES line of node id at ip, with its flags and primary ("-" for a
// primary).
func nodesLine(id, ip, flags, primary string) string {
	slots := ""
	if primary == "-" {
		slots = " 0-5460"
	}
	return fmt.Sprintf("%s %s:6379@16379 %s %s 0 0 1 connected%s\n", id, ip, flags, primary, slots)
}

// A FORCE that does not take within plan.FailoverCheck (the replica still says it is one: the
// primaries refused it their vote, chaos seed 60606) is followed at once by a TAKEOVER on the
// same replica, said with its reason; one that takes is not. The pass counts and records the
// takeover it did (Event, metric), not the FORCE that did not take.
func TestExecuteTakesOverWhenAForceDoesNotTake(t *testing.T) {
	f := newExecFixture(t, 3)
	f.node(1).On("CLUSTER NODES", valkeytest.Str(nodesLine(hexID(1), "10.0.0.2", "myself,slave", hexID(0))))
	rec := events.NewFakeRecorder(10)
	f.r.Events, f.r.Metrics = rec, metrics.New()
	began := time.Now()
	if err := f.run(t, plan.FailoverForce{Pod: "p1", PrimaryID: "n0", Shard: 0}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < plan.FailoverCheck-FailoverPoll {
		t.Fatalf("the takeover came %s after the FORCE, want %s of waiting for it to take first", took, plan.FailoverCheck)
	}
	got := f.fleet.Commands()
	if len(got) < 3 || got[0] != nodeAddr(podIP(1))+" CLUSTER FAILOVER FORCE" || got[len(got)-1] != nodeAddr(podIP(1))+" CLUSTER FAILOVER TAKEOVER" {
		t.Fatalf("commands: %v, want FORCE, CLUSTER NODES until %s, TAKEOVER", got, plan.FailoverCheck)
	}
	for _, c := range got[1 : len(got)-1] {
		if c != nodeAddr(podIP(1))+" CLUSTER NODES" {
			t.Fatalf("commands: %v, want only CLUSTER NODES between FORCE and TAKEOVER", got)
		}
	}
	lines := f.logs.FilterMessage(logging.MsgPrimaryGoneTakeover).All()
	if len(lines) != 1 || lines[0].ContextMap()[logging.FieldReason] != plan.TakeoverForceRefused {
		t.Fatalf("%d %q lines (%v), want one with reason %q", len(lines), logging.MsgPrimaryGoneTakeover, lines, plan.TakeoverForceRefused)
	}
	if n := f.logs.FilterMessage(logging.MsgPrimaryGonePromoting).Len(); n != 1 {
		t.Fatalf("%d %q lines, want 1", n, logging.MsgPrimaryGonePromoting)
	}
	if n := f.logs.FilterMessage(logging.MsgNoQuorumTakeover).Len(); n != 0 {
		t.Fatalf("%d %q lines, want none: the primaries are a majority", n, logging.MsgNoQuorumTakeover)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d Events, want 1 (the takeover's)", n)
	}
	if ev := <-rec.Events; !strings.Contains(ev, " "+EventTakeover+" ") || !strings.Contains(ev, logging.MsgPrimaryGoneTakeover) {
		t.Errorf("Event %q, want the takeover's (reason %s, %q)", ev, EventTakeover, logging.MsgPrimaryGoneTakeover)
	}
	want := fmt.Sprintf(`
# HELP valkey_cluster_failovers_total Failovers the operator issued, by kind: graceful (CLUSTER FAILOVER), forced (FORCE), takeover (TAKEOVER).
# TYPE valkey_cluster_failovers_total counter
valkey_cluster_failovers_total{cluster=%[1]q,kind="forced",namespace=%[2]q} 0
valkey_cluster_failovers_total{cluster=%[1]q,kind="graceful",namespace=%[2]q} 0
valkey_cluster_failovers_total{cluster=%[1]q,kind="takeover",namespace=%[2]q} 1
`, f.vc.Name, f.vc.Namespace)
	if err := testutil.CollectAndCompare(f.r.Metrics, strings.NewReader(want), "valkey_cluster_failovers_total"); err != nil {
		t.Error(err)
	}
}

// TestExecuteStopsAtTheFirstFailingStep: a node that refuses a step ends the pass there, and
// the error names the action and quotes Valkey; nothing after it is sent.
func TestExecuteStopsAtTheFirstFailingStep(t *testing.T) {
	f := newExecFixture(t, 3)
	f.node(1).On("CLUSTER REPLICATE", valkeytest.Err("ERR Unknown node n0"))
	err := f.run(t, plan.Meet{Pod: "p1", IP: "10.0.0.1", NodeID: "n0"}, plan.Replicate{Pod: "p1", PrimaryID: "n0"}, plan.Replicate{Pod: "p2", PrimaryID: "n0"})
	if err == nil || !strings.Contains(err.Error(), "Unknown node n0") {
		t.Fatalf("error = %v, want the refusal of CLUSTER REPLICATE", err)
	}
	f.wantCommands(t, "1: CLUSTER MEET 10.0.0.1 6379 16379", "1: CLUSTER REPLICATE n0")
}

// TestExecuteSetConfig: one CONFIG SET, one CONFIG GET to verify, then the node's record; a
// value the node reads back otherwise is an error, and the record is left as it was.
func TestExecuteSetConfig(t *testing.T) {
	set := plan.SetConfig{Pod: "p0", Set: []liveconf.Change{{Key: "maxmemory", Want: "64mb", Have: "0"}, {Key: "hz", Want: "20", Have: "10"}}}
	t.Run("applied and recorded", func(t *testing.T) {
		f := newExecFixture(t, 2)
		f.obs.snapshot.Settings = map[string]string{"maxmemory": "64mb", "hz": "20"}
		f.node(0).On("CONFIG GET", valkeytest.Map("hz", "20", "maxmemory", "67108864"))
		if err := f.run(t, set); err != nil {
			t.Fatal(err)
		}
		f.wantCommands(t, "0: CONFIG SET hz 20 maxmemory 64mb", "0: CONFIG GET hz maxmemory")
		var vn v1.ValkeyNode
		if err := f.k8s.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "p0"}, &vn); err != nil {
			t.Fatal(err)
		}
		if vn.Spec.ValkeySettings["maxmemory"] != "64mb" || vn.Spec.ValkeySettings["hz"] != "20" {
			t.Fatalf("ValkeyNode records %v", vn.Spec.ValkeySettings)
		}
		if n := f.logs.FilterMessage(logging.MsgApplyingSettingsLive).Len(); n != 1 {
			t.Fatalf("%d `applying settings live` lines, want 1", n)
		}
	})
	t.Run("read back otherwise", func(t *testing.T) {
		f := newExecFixture(t, 2)
		f.obs.snapshot.Settings = map[string]string{"maxmemory": "64mb", "hz": "20"}
		f.node(0).On("CONFIG GET", valkeytest.Map("hz", "10", "maxmemory", "67108864"))
		err := f.run(t, set, plan.Meet{Pod: "p1", IP: "10.0.0.1", NodeID: "n0"})
		if err == nil || !strings.Contains(err.Error(), `hz reads back "10"`) {
			t.Fatalf("error = %v, want the value read back", err)
		}
		// Harmless: the rest of the plan ran.
		f.wantCommands(t, "0: CONFIG SET hz 20 maxmemory 64mb", "0: CONFIG GET hz maxmemory", "1: CLUSTER MEET 10.0.0.1 6379 16379")
		var vn v1.ValkeyNode
		if err := f.k8s.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "p0"}, &vn); err != nil {
			t.Fatal(err)
		}
		if _, ok := vn.Spec.ValkeySettings["hz"]; ok {
			t.Fatalf("ValkeyNode records %v for a value the node does not run", vn.Spec.ValkeySettings)
		}
	})
}

// TestExecuteClassicMove: a slot between two Valkey 8 nodes moves with the classic protocol, in
// its order: the target importing, the source migrating, the keys drained in batches under
// acl.MigrationUser (MIGRATE ... REPLACE AUTH2), then the target told the owner before the source.
func TestExecuteClassicMove(t *testing.T) {
	f := newExecFixture(t, 2)
	for i := range 2 {
		f.node(i).On("INFO", valkeytest.Str("# Server\r\nvalkey_version:8.0.1\r\n"))
	}
	var batches atomic.Int32
	f.node(0).OnFunc("CLUSTER GETKEYSINSLOT", func([]string) valkeytest.Reply {
		if batches.Add(1) == 1 {
			return valkeytest.Strs("k1", "k2")
		}
		return valkeytest.Strs()
	})
	move := plan.MoveSlots{Moves: []plan.SlotMove{{Slot: 42, Source: "p0", Target: "p1", SourceID: "n0", TargetID: "n1"}}}
	if err := f.run(t, move); err != nil {
		t.Fatal(err)
	}
	f.wantCommands(t,
		"0: INFO server",
		"1: CLUSTER SETSLOT 42 IMPORTING n0",
		"0: CLUSTER SETSLOT 42 MIGRATING n1",
		"0: CLUSTER GETKEYSINSLOT 42 1000",
		"0: MIGRATE 10.0.0.2 6379  0 5000 REPLACE AUTH2 _momento_migrate mig-pw KEYS k1 k2",
		"0: CLUSTER GETKEYSINSLOT 42 1000",
		"1: CLUSTER SETSLOT 42 NODE n1",
		"0: CLUSTER SETSLOT 42 NODE n1",
	)
	// MIGRATE, the only command with key access, runs as acl.MigrationUser; everything else as the
	// operator.
	for _, c := range f.fleet.Calls() {
		want := acl.OperatorUser
		if c.Args[0] == "MIGRATE" {
			want = acl.MigrationUser
		}
		if c.User != want {
			t.Fatalf("%s sent as %s, want %s", c, c.User, want)
		}
	}
	if n := f.logs.FilterMessage(logging.MsgMovingSlots).FilterField(zap.String("method", "classic")).Len(); n != 1 {
		t.Fatalf("%d `moved slots` lines with method classic, want 1", n)
	}
}

// TestExecuteAtomicMove: two Valkey 9 nodes that enforce the replication user's slot import
// rules move a batch with one CLUSTER MIGRATESLOTS of the batch's ranges, once neither node has
// a migration running, and the pass waits for Valkey to say it succeeded.
func TestExecuteAtomicMove(t *testing.T) {
	f := newExecFixture(t, 2)
	repl := strings.Join(slices.Concat([]string{"user", acl.ReplicationUser}, acl.ReplicationRule(true)), " ")
	for i := range 2 {
		f.node(i).On("INFO", valkeytest.Str("# Server\r\nvalkey_version:9.1.2\r\n")).On("ACL LIST", valkeytest.Strs(repl))
	}
	f.node(1).On("CLUSTER GETSLOTMIGRATIONS", valkeytest.Array())
	var polls atomic.Int32
	f.node(0).OnFunc("CLUSTER GETSLOTMIGRATIONS", func([]string) valkeytest.Reply {
		if polls.Add(1) == 1 {
			return valkeytest.Array()
		}
		return valkeytest.Array(valkeytest.Map("name", "m1", "operation", "EXPORT", "slot_ranges", "10-12 14-14",
			"target_node", "n1", "source_node", "n0", "state", "success", "message", ""))
	})
	var moves []plan.SlotMove
	for _, s := range []int{10, 11, 12, 14} {
		moves = append(moves, plan.SlotMove{Slot: s, Source: "p0", Target: "p1", SourceID: "n0", TargetID: "n1"})
	}
	if err := f.run(t, plan.MoveSlots{Moves: moves}); err != nil {
		t.Fatal(err)
	}
	f.wantCommands(t,
		"0: INFO server", "0: ACL LIST",
		"1: INFO server", "1: ACL LIST",
		"0: CLUSTER GETSLOTMIGRATIONS",
		"1: CLUSTER GETSLOTMIGRATIONS",
		"0: CLUSTER MIGRATESLOTS SLOTSRANGE 10 12 14 14 NODE n1",
		"0: CLUSTER GETSLOTMIGRATIONS",
	)
	if n := f.logs.FilterMessage(logging.MsgMovingSlots).FilterField(zap.String("method", "atomic")).Len(); n != 1 {
		t.Fatalf("%d `moved slots` lines with method atomic, want 1", n)
	}
}

// TestSetUsersPushesOnlyWhatDiffers: a node whose ACL LOAD is unsafe gets ACL SETUSER for each
// user whose rules differ from the node's, and ACL DELUSER for each user the file drops; the
// default user is never deleted.
func TestSetUsersPushesOnlyWhatDiffers(t *testing.T) {
	fleet := valkeytest.New()
	n := fleet.Node("10.0.0.1:6379")
	c, err := valkey.Dialer(fleet.Dial).NewClient(n.Addr(), execCreds)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	file := "user default off\nuser app on >pw2 ~* +@all\nuser same on >pw ~* +get\n"
	current := []string{"user default off", "user app on >pw1 ~* +@all", "user same on >pw ~* +get", "user old on >x ~* +@all"}
	if err := setUsers(t.Context(), c, file, acl.Normalize(strings.Join(current, "\n")), nil); err != nil {
		t.Fatal(err)
	}
	got := fleet.Commands()
	want := []string{"10.0.0.1:6379 ACL SETUSER app reset on >pw2 ~* +@all", "10.0.0.1:6379 ACL DELUSER old"}
	if !slices.Equal(got, want) {
		t.Fatalf("commands sent:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestTLSReloadThroughTheSeam: a node serving an old certificate is told to read its files again
// (one CONFIG SET of the three TLS file parameters) and is reloaded once it serves the Secret's;
// a node that already serves it is sent nothing; one still serving the old one after the reload
// is behind.
func TestTLSReloadThroughTheSeam(t *testing.T) {
	ca := tlstest.NewPKI(t, "ca")
	leaf := func() (tls.Certificate, string) {
		certPEM, keyPEM := ca.Issue(tlstest.Leaf{})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, tlsmaterial.Fingerprint(c.Certificate[0])
	}
	oldCert, _ := leaf()
	newCert, want := leaf()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	creds := valkey.Credentials{Username: acl.OperatorUser, Password: "op-pw", TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ServerName: func(string) string { return "p0.vc.ns.svc.cluster.local" }}
	for _, tc := range []struct {
		name             string
		serving          tls.Certificate
		reloads          bool // the node serves the new certificate after CONFIG SET
		want             []string
		reloaded, behind bool
		mount            string // the pod's mount of the TLS Secret
	}{
		{name: "old certificate, reloaded", serving: oldCert, reloads: true, reloaded: true, mount: "/etc/valkey/tls",
			want: []string{"10.0.0.1:6379 CONFIG SET tls-ca-cert-file /etc/valkey/tls/ca.crt tls-cert-file /etc/valkey/tls/tls.crt tls-key-file /etc/valkey/tls/tls.key"}},
		{name: "already serving the Secret's", serving: newCert, mount: "/etc/valkey/tls"},
		{name: "old certificate, still old after the reload", serving: oldCert, behind: true, mount: "/etc/valkey/tls",
			want: []string{"10.0.0.1:6379 CONFIG SET tls-ca-cert-file /etc/valkey/tls/ca.crt tls-cert-file /etc/valkey/tls/tls.crt tls-key-file /etc/valkey/tls/tls.key"}},
		// A pod an older operator made keeps its paths until it is replaced.
		{name: "an older pod reloaded at its own paths", serving: oldCert, reloads: true, reloaded: true, mount: "/etc/valkey-tls",
			want: []string{"10.0.0.1:6379 CONFIG SET tls-ca-cert-file /etc/valkey-tls/ca.crt tls-cert-file /etc/valkey-tls/tls.crt tls-key-file /etc/valkey-tls/tls.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleet := valkeytest.New()
			n := fleet.Node("10.0.0.1:6379")
			serving := tc.serving
			n.ServeTLS(&serving)
			n.OnFunc("CONFIG SET", func([]string) valkeytest.Reply {
				if tc.reloads {
					n.ServeTLS(&newCert)
				}
				return valkeytest.OK()
			})
			r := &TLSReconciler{}
			r.conns.Dial = fleet.Dial
			defer r.conns.Forget("ns/vc")
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "valkey",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/valkey"}, {Name: "tls", MountPath: tc.mount}}}}}}
			got := r.reloadNode(t.Context(), "ns/vc", "p0", n.Addr(), resources.TLSFileParams(pod), creds, want, false)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.reloaded != tc.reloaded || got.behind != tc.behind {
				t.Fatalf("reloaded %t behind %t, want %t %t", got.reloaded, got.behind, tc.reloaded, tc.behind)
			}
			if cmds := fleet.Commands(); !slices.Equal(cmds, tc.want) {
				t.Fatalf("commands sent:\n  %s\nwant:\n  %s", strings.Join(cmds, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestExecuteBookkeepingAroundTheSteps: the bookkeeping actions hold nothing back and are held
// back by nothing but the ACL Secret, as they were as side steps of the pass. A failing step ends
// the steps, not the bookkeeping after them; a failing bookkeeping write is returned with the
// pass and the steps go on; an ACL Secret that cannot be written ends the steps (a pod created
// would mount it).
func TestExecuteBookkeepingAroundTheSteps(t *testing.T) {
	lifecycle := func(t *testing.T, f *execFixture, name string) v1.NodeLifecycle {
		t.Helper()
		var vn v1.ValkeyNode
		if err := f.k8s.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, &vn); err != nil {
			t.Fatal(err)
		}
		return vn.Spec.Lifecycle
	}
	t.Run("a failing step", func(t *testing.T) {
		f := newExecFixture(t, 3)
		f.node(1).On("CLUSTER REPLICATE", valkeytest.Err("ERR Unknown node n0"))
		err := f.run(t, plan.SetBudget{Shard: 0, Create: true}, plan.Replicate{Pod: "p1", PrimaryID: "n0"},
			plan.Meet{Pod: "p2", IP: "10.0.0.1", NodeID: "n0"}, plan.MarkActive{Pod: "p0"})
		if err == nil || !strings.Contains(err.Error(), "Unknown node n0") {
			t.Fatalf("error = %v, want the refusal of CLUSTER REPLICATE", err)
		}
		f.wantCommands(t, "1: CLUSTER REPLICATE n0")
		var pdbs policyv1.PodDisruptionBudgetList
		if err := f.k8s.List(t.Context(), &pdbs); err != nil || len(pdbs.Items) != 1 {
			t.Fatalf("budgets %d (%v), want the one created before the steps", len(pdbs.Items), err)
		}
		if lc := lifecycle(t, f, "p0"); lc != v1.LifecycleActive {
			t.Fatalf("p0 %s after a failing step, want Active: the bookkeeping after the steps still runs", lc)
		}
		if n := f.logs.FilterMessage(logging.MsgCompletedJoin).Len(); n != 1 {
			t.Fatalf("%d `completed join` lines, want 1", n)
		}
	})
	t.Run("a failing bookkeeping write", func(t *testing.T) {
		f := newExecFixture(t, 3)
		// An update of a budget the pass did not observe: a broken invariant, which the
		// executor reports without holding back the steps.
		err := f.run(t, plan.SetBudget{Shard: 0}, plan.Meet{Pod: "p0", IP: "10.0.0.2", NodeID: "n1"})
		if err == nil || !strings.Contains(err.Error(), "no budget of shard 0 observed") {
			t.Fatalf("error = %v, want the budget's", err)
		}
		f.wantCommands(t, "0: CLUSTER MEET 10.0.0.2 6379 16379")
	})
	t.Run("an ACL Secret that cannot be written", func(t *testing.T) {
		f := newExecFixture(t, 3)
		theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.ACLSecretName(f.vc)}}
		if err := f.k8s.Create(t.Context(), theirs); err != nil {
			t.Fatal(err)
		}
		f.obs.aclSecret = resources.BuildACLSecret(f.vc, "user default off", "pw")
		err := f.run(t, plan.WriteACLSecret{}, plan.Meet{Pod: "p0", IP: "10.0.0.2", NodeID: "n1"}, plan.MarkActive{Pod: "p1"})
		if err == nil || !strings.Contains(err.Error(), "not controlled by") {
			t.Fatalf("error = %v, want the Secret's owner", err)
		}
		f.wantCommands(t)
		var s corev1.Secret
		if err := f.k8s.Get(t.Context(), client.ObjectKeyFromObject(theirs), &s); err != nil || len(s.Data) != 0 {
			t.Fatalf("someone else's Secret written: %v %v", s.Data, err)
		}
		if lc := lifecycle(t, f, "p1"); lc != v1.LifecycleActive {
			t.Fatalf("p1 %s, want Active", lc)
		}
	})
}

// TestFailoverEventSaysWhatTheLogSays: every kind of failover the operator issues records an
// Event with the words of its log line (failoverMessage, one source for both), its shard and the
// replica promoted; each kind its own words (a spread once recorded a deletion's).
func TestFailoverEventSaysWhatTheLogSays(t *testing.T) {
	kinds := []plan.Action{
		plan.Failover{Pod: "p1", PrimaryID: "n0", Shard: 2, Purpose: plan.HandOver},
		plan.Failover{Pod: "p1", PrimaryID: "n0", Shard: 2, Purpose: plan.Roll},
		plan.Failover{Pod: "p1", PrimaryID: "n0", Shard: 2, Purpose: plan.Realign},
		plan.Failover{Pod: "p1", PrimaryID: "n0", Shard: 2, Purpose: plan.Spread, Zone: "zone-a"},
		plan.FailoverForce{Pod: "p1", PrimaryID: "n0", Shard: 2},
		plan.Takeover{Pod: "p1", PrimaryID: "n0", Shard: 2},
		plan.Takeover{Pod: "p1", PrimaryID: "n0", Shard: 2, Reason: plan.TakeoverStaleView},
	}
	seen := map[string]bool{}
	for _, a := range kinds {
		t.Run(a.String(), func(t *testing.T) {
			f := newExecFixture(t, 3)
			if _, ok := a.(plan.FailoverForce); ok {
				// It takes: a refused FORCE adds a takeover's line (TestExecuteTakesOverWhenAForceDoesNotTake).
				f.node(1).On("CLUSTER NODES", valkeytest.Str(nodesLine(hexID(1), "10.0.0.2", "myself,master", "-")))
			}
			rec := events.NewFakeRecorder(10)
			f.r.Events = rec
			if err := f.run(t, a); err != nil {
				t.Fatal(err)
			}
			lines := f.logs.FilterLevelExact(zap.InfoLevel).All()
			if len(lines) != 1 {
				t.Fatalf("%d INFO lines, want 1: %+v", len(lines), lines)
			}
			msg := lines[0].Message
			if msg != failoverMessage(a) || seen[msg] {
				t.Fatalf("logged %q (seen before: %t)", msg, seen[msg])
			}
			seen[msg] = true
			select {
			case ev := <-rec.Events:
				if !strings.Contains(ev, "shard 2: "+msg+" (pod p1") {
					t.Errorf("Event %q does not say what the log says: %q", ev, msg)
				}
				if sp, ok := a.(plan.Failover); ok && sp.Purpose == plan.Spread && !strings.Contains(ev, "zone-a") {
					t.Errorf("the spread's Event does not name the zone it leaves: %q", ev)
				}
			default:
				t.Fatal("no Event recorded")
			}
		})
	}
}
