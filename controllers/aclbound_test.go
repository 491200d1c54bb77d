package controllers

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gomomento/valkey-operator/acl"
	"github.com/gomomento/valkey-operator/logging"
	"github.com/gomomento/valkey-operator/resources"
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/valkeytest"
)

// aclPass is a formed 1x0 cluster through the seam (newSeamPass) and an ACL controller on it,
// its replies bounded as in production.
type aclPass struct {
	*seamPass
	a *ACLReconciler
}

func newACLPass(t *testing.T, version string) *aclPass {
	s := newSeamPass(t)
	if version != "" {
		s.fleet.Node("10.0.0.1:6379").On("INFO server", valkeytest.Str("# Server\r\nvalkey_version:"+version+"\r\n"))
	}
	s.pass(t)
	s.pass(t) // formed, and the ACL Secret rendered
	a := &ACLReconciler{Client: s.c, APIReader: s.c}
	a.conns.Dial, a.conns.MaxReply = s.fleet.Dial, aclMaxReply
	t.Cleanup(func() { a.conns.Forget("ns/vc") })
	return &aclPass{seamPass: s, a: a}
}

// run runs one ACL pass and returns the commands the node received and the log.
func (p *aclPass) run(t *testing.T) ([]string, *observer.ObservedLogs) {
	t.Helper()
	p.fleet.Reset()
	core, logs := observer.New(zap.DebugLevel)
	ctx := logging.IntoContext(t.Context(), zap.New(core))
	if _, err := p.a.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "vc"}}); err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, c := range p.fleet.Calls() {
		cmd := strings.Join(c.Args, " ")
		if strings.HasPrefix(cmd, "ACL SETUSER ") {
			cmd = strings.Join(c.Args[:3], " ") // the rules carry hashes
		}
		cmds = append(cmds, cmd)
	}
	return cmds, logs
}

// setByHand sets users on the node as a team could through its default user.
func (p *aclPass) setByHand(t *testing.T, users map[string][]string) {
	t.Helper()
	c, err := valkey.Dialer(p.fleet.Dial).NewClient("10.0.0.1:6379", valkey.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, rules := range users {
		if err := c.ACLSetUser(t.Context(), name, rules); err != nil {
			t.Fatal(err)
		}
	}
}

// TestACLReadOnceAndOnlyWhatDiffers: a node that enforces the file is asked its users' names and
// rules once, and sent nothing else; a user set by hand is reverted (Valkey 9: ACL LOAD; Valkey 8:
// ACL SETUSER of what differs and ACL DELUSER of the extra one) and said `ACL applied`. Before,
// every pass read ACL LIST twice and loaded the file.
func TestACLReadOnceAndOnlyWhatDiffers(t *testing.T) {
	read := []string{"ACL USERS", "INFO server", "ACL LIST"}
	t.Run("8.0.1", func(t *testing.T) {
		p := newACLPass(t, "") // Simulate's 8.0.1
		p.run(t)               // the first pass sets the file's users
		if cmds, _ := p.run(t); !slices.Equal(cmds, read) {
			t.Fatalf("a node that enforces the file was sent:\n  %s", strings.Join(cmds, "\n  "))
		}
		p.setByHand(t, map[string][]string{"intruder": {"on", "nopass", "~*", "+@all"}, acl.OperatorUser: {"+flushall"}})
		cmds, logs := p.run(t)
		want := append(slices.Clone(read), "ACL SETUSER "+acl.OperatorUser, "ACL DELUSER intruder", "ACL LIST")
		if !slices.Equal(cmds, want) {
			t.Errorf("a node with users set by hand was sent:\n  %s\nwant\n  %s", strings.Join(cmds, "\n  "), strings.Join(want, "\n  "))
		}
		if n := len(logs.FilterMessage(logging.MsgACLApplied).All()); n != 1 {
			t.Errorf("%d %q lines", n, logging.MsgACLApplied)
		}
	})
	t.Run("9.1.2", func(t *testing.T) {
		p := newACLPass(t, "9.1.2")
		var secret corev1.Secret
		if err := p.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "vc-acl"}, &secret); err != nil {
			t.Fatal(err)
		}
		file := acl.Lines(string(secret.Data[resources.ACLFileName]))
		var mu sync.Mutex
		tampered := false
		node := p.fleet.Node("10.0.0.1:6379")
		node.OnFunc("ACL LIST", func([]string) valkeytest.Reply {
			mu.Lock()
			defer mu.Unlock()
			var lines []string
			for _, l := range file {
				lines = append(lines, strings.Join(append([]string{"user", l.Name}, l.Rules...), " "))
			}
			if tampered {
				lines = append(lines, "user intruder on nopass ~* +@all")
			}
			return valkeytest.Strs(lines...)
		})
		node.OnFunc("ACL LOAD", func([]string) valkeytest.Reply {
			mu.Lock()
			defer mu.Unlock()
			tampered = false
			return valkeytest.OK()
		})
		if cmds, _ := p.run(t); !slices.Equal(cmds, read) {
			t.Fatalf("a node that enforces the file was sent:\n  %s", strings.Join(cmds, "\n  "))
		}
		mu.Lock()
		tampered = true
		mu.Unlock()
		cmds, logs := p.run(t)
		if want := append(slices.Clone(read), "ACL LOAD", "ACL LIST"); !slices.Equal(cmds, want) {
			t.Errorf("a node with a user set by hand was sent:\n  %s\nwant\n  %s", strings.Join(cmds, "\n  "), strings.Join(want, "\n  "))
		}
		if n := len(logs.FilterMessage(logging.MsgACLApplied).All()); n != 1 {
			t.Errorf("%d %q lines", n, logging.MsgACLApplied)
		}
	})
}

// TestACLFarBeyondTheFileIsNotRead: a node holding 40 users more than its file (set by hand,
// each with a 64 KiB key pattern) is not asked their rules: it is reported (WARN with the counts)
// and put back by name; a node whose few users' rules are longer than the ACL controller reads
// (aclMaxReply) is reported and put back too. Before, ACL LIST was read whole, twice.
func TestACLFarBeyondTheFileIsNotRead(t *testing.T) {
	p := newACLPass(t, "")
	p.run(t)
	extra := map[string][]string{}
	for i := range 40 {
		extra[fmt.Sprintf("u%02d", i)] = []string{"on", "nopass", "~" + strings.Repeat("k", 64<<10), "+@all"}
	}
	p.setByHand(t, extra)
	cmds, logs := p.run(t)
	if slices.Index(cmds, "ACL LIST") != len(cmds)-1 {
		t.Errorf("ACL LIST read before the node was put back:\n  %s", strings.Join(cmds, "\n  "))
	}
	deleted := 0
	for _, c := range cmds {
		if strings.HasPrefix(c, "ACL DELUSER u") {
			deleted++
		}
	}
	if deleted != 40 {
		t.Errorf("%d users deleted, want 40", deleted)
	}
	warns := logs.FilterMessage(logging.MsgACLNodeOversized).All()
	if len(warns) != 1 || warns[0].ContextMap()[logging.FieldUsers] != int64(44) || warns[0].ContextMap()[logging.FieldDeclared] != int64(4) ||
		warns[0].ContextMap()[logging.FieldPod] != "vc-aaaaa" {
		t.Errorf("WARN lines %+v", warns)
	}
	if cmds, _ := p.run(t); !slices.Equal(cmds, []string{"ACL USERS", "INFO server", "ACL LIST"}) {
		t.Errorf("after it was put back, a pass sent:\n  %s", strings.Join(cmds, "\n  "))
	}

	// The file's own users, with rules longer than the bound.
	p.setByHand(t, map[string][]string{acl.OperatorUser: {"~" + strings.Repeat("k", aclMaxReply)}})
	cmds, logs = p.run(t)
	set := 0
	for _, c := range cmds {
		if strings.HasPrefix(c, "ACL SETUSER ") {
			set++
		}
	}
	// Its rules unread, every user of the file is set again; said once per tick: the WARN of the
	// first case stands for this node.
	if set != 4 || len(logs.FilterMessage(logging.MsgACLNodeOversized).All()) != 0 {
		t.Errorf("rules over the bound:\n  %s\n%v", strings.Join(cmds, "\n  "), logs.All())
	}
}

// TestACLUsersDeniedByAnOlderFile: a node that still enforces a file from before the operator's
// user was granted ACL USERS (an operator upgrade) answers it NOPERM; its ACL is read with ACL
// LIST instead, and the new file put on it, with no WARN.
func TestACLUsersDeniedByAnOlderFile(t *testing.T) {
	p := newACLPass(t, "")
	p.run(t)
	p.fleet.Node("10.0.0.1:6379").On("ACL USERS", valkeytest.Err("NOPERM User _momento_operator has no permissions to run the 'acl|users' command"))
	p.setByHand(t, map[string][]string{"intruder": {"on", "nopass", "~*", "+@all"}})
	cmds, logs := p.run(t)
	if !slices.Contains(cmds, "ACL DELUSER intruder") || len(logs.FilterLevelExact(zap.WarnLevel).All()) != 0 {
		t.Errorf("sent:\n  %s\nlog %v", strings.Join(cmds, "\n  "), logs.All())
	}
}
