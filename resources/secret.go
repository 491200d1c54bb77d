package resources

import (
	"crypto/rand"
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

// BuildCredentialSecret holds the system users' passwords for the cluster, generated once.
func BuildCredentialSecret(vc *v1.ValkeyCluster) (*corev1.Secret, error) {
	op, err := NewPassword()
	if err != nil {
		return nil, err
	}
	repl, err := NewPassword()
	if err != nil {
		return nil, err
	}
	migrate, err := NewPassword()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: ObjectMeta(vc, CredentialSecretName(vc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{OperatorPasswordKey: []byte(op), ReplPasswordKey: []byte(repl), MigratePasswordKey: []byte(migrate)},
	}, nil
}

// NewPassword is 32 random bytes in hex.
func NewPassword() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return hex.EncodeToString(buf), nil
}
