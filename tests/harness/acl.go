package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Role builds a cluster-scoped ValkeyRole allowing the command categories cats, with the
// command rules cmds.
func Role(name string, cats []string, cmds ...v1.CommandRule) *v1.ValkeyRole {
	r := &v1.ValkeyRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range cats {
		r.Spec.Categories = append(r.Spec.Categories, v1.CategoryRule{Name: c, Access: v1.RuleAllow})
	}
	r.Spec.Commands = cmds
	return r
}

// Bind builds an ACL binding of user with the hashes of passwords and perms.
func Bind(user string, passwords []string, perms ...v1.ACLPermission) v1.ACLBinding {
	b := v1.ACLBinding{Username: user, Permissions: perms}
	for _, pw := range passwords {
		b.PasswordHashes = append(b.PasswordHashes, PasswordHash(pw))
	}
	return b
}

// Permit builds a permission of roleRef on the keys matching pattern with access.
func Permit(roleRef, pattern string, access v1.KeyAccess) v1.ACLPermission {
	return v1.ACLPermission{RoleRef: roleRef, Keys: []v1.KeyPattern{{Pattern: pattern, Access: access}}}
}

// NodeDo runs one command on one node as user (no user: no AUTH), on a connection of its own.
// A NOAUTH/WRONGPASS at connect is returned as the error.
func NodeDo(p corev1.Pod, user, pw string, args ...string) (string, error) {
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress: []string{PodAddr(p)}, Username: user, Password: pw,
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

// Expectation checks one reply.
type Expectation func(string, error) bool

func errPrefix(prefix string) Expectation {
	return func(_ string, err error) bool { return err != nil && strings.Contains(err.Error(), prefix) }
}

var (
	Noperm   = errPrefix("NOPERM")
	Refused  = errPrefix("WRONGPASS")
	Noauth   = errPrefix("NOAUTH")
	Answered = func(s string, err error) bool { return err == nil }
)

// WaitStateMessage waits for vc's state and status.message.
func WaitStateMessage(t *testing.T, vc *v1.ValkeyCluster, state v1.State, message string) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("state %s with message %q", state, message), time.Minute, func() string {
		cur := CurrentCluster(t, vc)
		if cur.Status.State == state && cur.Status.Message == message {
			return ""
		}
		return fmt.Sprintf("state %s message %q", cur.Status.State, cur.Status.Message)
	})
}
