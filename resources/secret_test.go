package resources

import (
	"regexp"
	"strings"
	"testing"
)

// New clusters' credential Secret holds the original's two keys, 128 hex characters each; the
// migration user's password is derived from the operator's, unless an older operator stored one.
func TestCredentialSecretKeys(t *testing.T) {
	s, err := BuildCredentialSecret(newTestCluster())
	if err != nil {
		t.Fatal(err)
	}
	hex128 := regexp.MustCompile(`^[0-9a-f]{128}$`)
	if len(s.Data) != 2 || !hex128.Match(s.Data["operator-password"]) || !hex128.Match(s.Data["repl-password"]) {
		t.Fatalf("credential Secret data: %d keys", len(s.Data))
	}
	migrate := MigratePassword(s.Data)
	if !hex128.MatchString(migrate) || migrate == OperatorPassword(s.Data) || strings.Contains(migrate, OperatorPassword(s.Data)) {
		t.Errorf("derived migration password %q", migrate)
	}
	if MigratePassword(s.Data) != migrate {
		t.Error("the derived migration password is not stable")
	}
	other, _ := BuildCredentialSecret(newTestCluster())
	if MigratePassword(other.Data) == migrate {
		t.Error("two clusters derive the same migration password")
	}

	older := map[string][]byte{"password": []byte("op"), "repl-password": []byte("r"), "migrate-password": []byte("m")}
	if OperatorPassword(older) != "op" || MigratePassword(older) != "m" {
		t.Errorf("older Secret read as %q, %q", OperatorPassword(older), MigratePassword(older))
	}
	delete(older, "migrate-password")
	if m := MigratePassword(older); !hex128.MatchString(m) {
		t.Errorf("an older Secret without migrate-password derives %q", m)
	}
	if OperatorPassword(map[string][]byte{}) != "" || MigratePassword(map[string][]byte{}) != "" {
		t.Error("passwords read from an empty Secret")
	}
}
