package bench

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gomomento/valkey-operator/tests/harness"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func ensureNS(ctx context.Context, name string) error {
	return harness.EnsureNamespace(ctx, harness.K8s, name)
}
