package resources

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/gomomento/valkey-operator/acl"
	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// BuildACLSecret holds the ACL file and auth.conf: masteruser / masterauth, with which replicas
// authenticate to their primary as the replication user (and the liveness probe PINGs).
func BuildACLSecret(vc *v1.ValkeyCluster, aclFile, replPassword string) *corev1.Secret {
	auth := fmt.Sprintf("masteruser %s\nmasterauth %s\n", acl.ReplicationUser, replPassword)
	return &corev1.Secret{
		ObjectMeta: ObjectMeta(vc, ACLSecretName(vc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ACLFileName: []byte(aclFile), AuthFileName: []byte(auth)},
	}
}

// BuildCredentialSecret holds the system users' passwords for the cluster, generated once: the
// original's two keys (security/index.md), operator-password and repl-password, 128 hex
// characters each. The migration user's password is derived from the operator's
// (MigratePassword), so the Secret holds nothing the original's does not.
func BuildCredentialSecret(vc *v1.ValkeyCluster) (*corev1.Secret, error) {
	op, err := NewPassword()
	if err != nil {
		return nil, err
	}
	repl, err := NewPassword()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: ObjectMeta(vc, CredentialSecretName(vc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{OperatorPasswordKey: []byte(op), ReplPasswordKey: []byte(repl)},
	}, nil
}

// passwordBytes is the entropy of a generated password: 64 random bytes, 128 hex characters,
// as the original's.
const passwordBytes = 64

// NewPassword is 64 random bytes in hex (128 characters).
func NewPassword() (string, error) {
	buf := make([]byte, passwordBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// OperatorPassword is the operator's password in a credential Secret's data: operator-password,
// or in a Secret an older operator made, password. "" when neither is set.
func OperatorPassword(data map[string][]byte) string {
	if pw := data[OperatorPasswordKey]; len(pw) > 0 {
		return string(pw)
	}
	return string(data[LegacyOperatorPasswordKey])
}

// MigratePassword is the migration user's password for a credential Secret's data: the one an
// older operator stored (migrate-password), whose hash the nodes already hold; otherwise an
// HMAC-SHA-512 of a fixed label keyed with the operator's password, in hex (128 characters).
// Derived, it needs no key of its own in the Secret (the original's has two), and stays the same
// for as long as the operator's password does; the migration user's password travels to other
// nodes in MIGRATE … AUTH2, and the HMAC does not give the operator's away.
func MigratePassword(data map[string][]byte) string {
	if pw := data[LegacyMigratePasswordKey]; len(pw) > 0 {
		return string(pw)
	}
	op := OperatorPassword(data)
	if op == "" {
		return ""
	}
	mac := hmac.New(sha512.New, []byte(op))
	mac.Write([]byte(migratePasswordLabel))
	return hex.EncodeToString(mac.Sum(nil))
}

// migratePasswordLabel is what MigratePassword authenticates: changing it changes the migration
// password of every cluster without a migrate-password key.
const migratePasswordLabel = "valkey-operator migration user " + acl.MigrationUser
