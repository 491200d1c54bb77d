package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/valkey"
)

// failoverStatus is an intent in the API's terms.
func failoverStatus(f *fsm.FailoverIntent) *v1.FailoverStatus {
	if f == nil {
		return nil
	}
	mode := ""
	switch {
	case f.Takeover:
		mode = string(valkey.FailoverTakeover)
	case f.Force:
		mode = string(valkey.FailoverForce)
	}
	return &v1.FailoverStatus{Shard: int32(f.Shard), Pod: f.Pod, PrimaryNodeID: f.PrimaryID, Mode: mode, StartedAt: metav1.NewTime(f.StartedAt.Truncate(time.Second))}
}
