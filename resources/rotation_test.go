package resources

import (
	"testing"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// TestRotationPasswords follows a credential Secret's data through a rotation: the next
// passwords written once, each phase's passwords, then the promotion under the original's keys
// (an older operator's legacy keys dropped, so the migration password derives from the new one).
func TestRotationPasswords(t *testing.T) {
	data := map[string][]byte{LegacyOperatorPasswordKey: []byte("op0"), ReplPasswordKey: []byte("repl0"), LegacyMigratePasswordKey: []byte("mig0")}
	cur, _, ok := StoredPasswords(data)
	if ok || cur.Operator != "op0" || cur.Migrate != "mig0" {
		t.Fatalf("before: %+v, next stored %v", cur, ok)
	}
	if pp := ForPhase(v1.RotationAdding, data); pp.Use != cur || pp.Also != (SystemPasswords{}) {
		t.Fatalf("Adding without next passwords: %+v", pp)
	}
	withNext, changed, err := WithNextPasswords(data)
	if err != nil || !changed {
		t.Fatalf("WithNextPasswords: %v %v", changed, err)
	}
	if again, changed, _ := WithNextPasswords(withNext); changed || string(again[OperatorPasswordNextKey]) != string(withNext[OperatorPasswordNextKey]) {
		t.Fatal("the next passwords were written twice")
	}
	partial := map[string][]byte{OperatorPasswordKey: []byte("op0"), ReplPasswordKey: []byte("repl0"), ReplPasswordNextKey: []byte("repl1")}
	if !NextPartial(partial) || NextPartial(withNext) || NextPartial(data) {
		t.Fatal("NextPartial")
	}
	if filled, _, _ := WithNextPasswords(partial); string(filled[ReplPasswordNextKey]) != "repl1" || len(filled[OperatorPasswordNextKey]) == 0 {
		t.Fatal("WithNextPasswords did not keep the next replication password a replica may use already")
	}
	_, next, ok := StoredPasswords(withNext)
	if !ok || next.Operator == "" || next.Repl == "" || next.Migrate == "" || next.Migrate == cur.Migrate {
		t.Fatalf("next: %+v", next)
	}
	for _, c := range []struct {
		phase     string
		use, also SystemPasswords
	}{
		{"", cur, SystemPasswords{}},
		{v1.RotationAdding, cur, next},
		{v1.RotationSwitching, next, cur},
		{v1.RotationRetiring, next, SystemPasswords{}},
		{v1.RotationComplete, cur, SystemPasswords{}},
	} {
		if pp := ForPhase(c.phase, withNext); pp.Use != c.use || pp.Also != c.also {
			t.Errorf("phase %q: %+v", c.phase, pp)
		}
	}
	promoted, changed := PromotedPasswords(withNext)
	if !changed {
		t.Fatal("not promoted")
	}
	after, _, ok := StoredPasswords(promoted)
	if ok || after != next {
		t.Fatalf("after the promotion: %+v (next still stored: %v), want %+v", after, ok, next)
	}
	for _, k := range []string{LegacyOperatorPasswordKey, LegacyMigratePasswordKey, OperatorPasswordNextKey, ReplPasswordNextKey} {
		if _, ok := promoted[k]; ok {
			t.Errorf("key %s kept", k)
		}
	}
	if pp := ForPhase(v1.RotationRetiring, promoted); pp.Use != next {
		t.Errorf("Retiring once promoted: %+v", pp)
	}
	// The ACL file of each phase holds exactly the hashes SystemHashes says.
	sys := ForPhase(v1.RotationSwitching, withNext).SystemUsers()
	h := acl.SystemHashes(sys)
	if len(h[acl.OperatorUser]) != 2 || len(h[acl.ReplicationUser]) != 2 || len(h[acl.MigrationUser]) != 2 {
		t.Fatalf("hashes while Switching: %v", h)
	}
	file := acl.Render(nil, nil, sys)
	if !acl.KeepsOperator(file, cur.Operator) || !acl.KeepsOperator(file, next.Operator) {
		t.Fatal("the Switching file does not let both operator passwords in")
	}
	if acl.KeepsOperator(acl.Render(nil, nil, ForPhase(v1.RotationRetiring, promoted).SystemUsers()), cur.Operator) {
		t.Fatal("the Retiring file still lets the old operator password in")
	}
}
