package resources

import (
	"maps"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// SystemPasswords are the passwords of a cluster's three system users.
type SystemPasswords struct {
	Operator, Repl, Migrate string
}

// StoredPasswords reads a credential Secret's data: the current passwords, and the next ones
// while a rotation has written them (ok false otherwise). The next migration password is
// derived from the next operator password, as a new cluster's is.
func StoredPasswords(data map[string][]byte) (current, next SystemPasswords, ok bool) {
	current = SystemPasswords{Operator: OperatorPassword(data), Repl: string(data[ReplPasswordKey]), Migrate: MigratePassword(data)}
	op, repl := string(data[OperatorPasswordNextKey]), string(data[ReplPasswordNextKey])
	if op == "" || repl == "" {
		return current, SystemPasswords{}, false
	}
	return current, SystemPasswords{Operator: op, Repl: repl, Migrate: MigratePassword(map[string][]byte{OperatorPasswordKey: []byte(op)})}, true
}

// NextPartial reports whether data holds one of the next passwords and not the other: the
// Secret was edited by hand during a rotation.
func NextPartial(data map[string][]byte) bool {
	return (len(data[OperatorPasswordNextKey]) > 0) != (len(data[ReplPasswordNextKey]) > 0)
}

// WithNextPasswords returns data with fresh next passwords where it holds none: a rotation whose
// first step was carried out before the operator restarted keeps them, and one whose Secret lost
// one of them by hand keeps the other (a node may have been given them, a replica may
// authenticate with the next replication password already).
func WithNextPasswords(data map[string][]byte) (map[string][]byte, bool, error) {
	if _, _, ok := StoredPasswords(data); ok {
		return data, false, nil
	}
	out := maps.Clone(data)
	for _, k := range []string{OperatorPasswordNextKey, ReplPasswordNextKey} {
		if len(out[k]) > 0 {
			continue
		}
		pw, err := NewPassword()
		if err != nil {
			return nil, false, err
		}
		out[k] = []byte(pw)
	}
	return out, true, nil
}

// PromotedPasswords returns data with the next passwords made the current ones, under the
// original's key names: the next keys go, and so do the legacy keys (an older operator's
// password and migrate-password), so that the migration password is derived from the new
// operator password. Unchanged (false) when data holds no next passwords.
func PromotedPasswords(data map[string][]byte) (map[string][]byte, bool) {
	_, next, ok := StoredPasswords(data)
	if !ok {
		return data, false
	}
	out := maps.Clone(data)
	out[OperatorPasswordKey], out[ReplPasswordKey] = []byte(next.Operator), []byte(next.Repl)
	for _, k := range []string{OperatorPasswordNextKey, ReplPasswordNextKey, LegacyOperatorPasswordKey, LegacyMigratePasswordKey} {
		delete(out, k)
	}
	return out, true
}

// PhasePasswords are the system users' passwords in one phase of a rotation: Use, which the
// operator connects with and replicas authenticate with (auth.conf), and Also, accepted beside
// them by every node ("" when none).
type PhasePasswords struct {
	Use, Also SystemPasswords
}

// ForPhase chooses a cluster's passwords for a rotation phase (status.passwordRotation.phase,
// "" or Complete when none is under way) from its credential Secret's data: while Adding the
// current ones are used and the next ones accepted; while Switching the next ones are used and
// the current ones still accepted; while Retiring only the next ones (or, once the Secret made
// them current, the current ones).
func ForPhase(phase string, data map[string][]byte) PhasePasswords {
	current, next, ok := StoredPasswords(data)
	switch {
	case !ok:
		return PhasePasswords{Use: current}
	case phase == v1.RotationAdding:
		return PhasePasswords{Use: current, Also: next}
	case phase == v1.RotationSwitching:
		return PhasePasswords{Use: next, Also: current}
	case phase == v1.RotationRetiring:
		return PhasePasswords{Use: next}
	}
	// Next passwords without a rotation under way: a rotation recorded as started had not yet
	// been (its status not written), so no node knows them.
	return PhasePasswords{Use: current}
}

// SystemUsers are the acl package's system users for p: the passwords used, and those also
// accepted.
func (p PhasePasswords) SystemUsers() acl.SystemUsers {
	return acl.SystemUsers{
		OperatorPassword: p.Use.Operator, ReplPassword: p.Use.Repl, MigratePassword: p.Use.Migrate,
		OperatorAlso: p.Also.Operator, ReplAlso: p.Also.Repl, MigrateAlso: p.Also.Migrate,
	}
}
