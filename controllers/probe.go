package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// Liveness probe timing: a server that has not answered for about 15 s (three misses, 5 s
// apart, each allowed 3 s) is hung, and its pod is killed. restartPolicy Never makes that a
// Failed pod, which the operator replaces (failing over first when it was a primary). Probing
// more often would only add load; cluster-node-timeout (5 s) lets Valkey itself react sooner.
const (
	livenessPeriodSeconds    = 5
	livenessTimeoutSeconds   = 3
	livenessFailureThreshold = 3
)

// livenessScript is an authenticated PING through valkey-cli, run inside the container, as the
// replication user (which may PING and nothing else that matters here): the user and password
// are read from the mounted auth.conf (masteruser / masterauth), the password into valkey-cli's
// environment, never onto a command line that ps or an event would show.
// valkey-cli exits 0 on error replies, so the reply is what counts. Alive: PONG, and the
// replies of a server that answers but cannot serve yet (LOADING a dataset, MASTERDOWN while a
// replica's link is down) or refuses the credentials (NOAUTH: a credential problem is the
// operator's to report, never a reason to kill every node of a cluster at once). Not alive: no
// reply within the timeout (hung, or stopped), a refused connection, BUSY (a script that will
// not end), anything else.
var livenessScript = fmt.Sprintf(`user=$(sed -n 's/^masteruser //p' %[1]s/%[2]s)
pw=$(sed -n 's/^masterauth //p' %[1]s/%[2]s)
reply=$(REDISCLI_AUTH="$pw" VALKEYCLI_AUTH="$pw" valkey-cli --no-auth-warning --user "$user" -p %[3]d PING 2>/dev/null)
case "$reply" in PONG|LOADING*|MASTERDOWN*|NOAUTH*) exit 0 ;; esac
echo "PING: ${reply:-no reply}"
exit 1
`, secretMountPath, authFileName, ClientPort)

// livenessProbe is the pod's only probe, as the original's pods carry (concepts/pod-management):
// it turns a hung server into a dead pod. There is no readiness probe: clients find nodes
// through the cluster protocol, not through Service endpoints, and a readiness gate would be a
// second, conflicting view of a node's health. Under TLS the probe is a TCP connect, since the
// client port speaks only TLS.
func livenessProbe(vc *v1.ValkeyCluster) *corev1.Probe {
	handler := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", livenessScript}}}
	if vc.Spec.TLS != nil {
		handler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ClientPort)}}
	}
	return &corev1.Probe{
		ProbeHandler:     handler,
		PeriodSeconds:    livenessPeriodSeconds,
		TimeoutSeconds:   livenessTimeoutSeconds,
		FailureThreshold: livenessFailureThreshold,
	}
}

// preStopDelaySeconds is how long a deleted pod's server keeps serving before it gets SIGTERM,
// on Valkey 8: time for the operator to see the deletion (a watch event, then a pass) and for
// the graceful CLUSTER FAILOVER it issues on a synced replica to complete (the replica catches
// up with the primary, which pauses its writers meanwhile, then takes over), well within
// terminationGracePeriodSeconds (30).
const preStopDelaySeconds = 5

// preStop delays SIGTERM on Valkey 8 so that a deleted primary's slots are handed over while it
// still serves (plan/failover.go, rule 4b). On 9.x the server hands over itself on SIGTERM
// (shutdown-on-sigterm failover), and the pod has no hook. A replica's pod waits too: the
// delay costs a drain a few seconds and nothing else.
func preStop(img v1.ValkeyImageSpec) *corev1.Lifecycle {
	if handsOverOnSIGTERM(img) {
		return nil
	}
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", preStopDelaySeconds)},
	}}}
}
