package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tlsmaterial"
	"github.com/gomomento/valkey-operator/version"
)

// Liveness probe timing: a server that has not answered for about 50 s (five misses, 10 s
// apart, each allowed 5 s) is hung, and its pod is killed. restartPolicy Never makes that a
// Failed pod, which the operator replaces (failing over first when it was a primary). The probe
// does not need to be quick: a hung primary's replica is promoted by Valkey itself after
// cluster-node-timeout (5 s), so clients never wait on the probe. It must not kill a server that
// is only slow: a node starved of CPU answers late on every pod at once, and a kill of both
// copies of a shard is the one way a probe loses data. Measured on this 2-core machine at load
// 27-57 (a demo and the chaos suite beside other local clusters), with 15 s (three misses, 5 s
// apart, 3 s each) both pods of a shard were killed at once, and the shard served again empty.
const (
	livenessPeriodSeconds    = 10
	livenessTimeoutSeconds   = 5
	livenessFailureThreshold = 5
)

// livenessScript is an authenticated PING through valkey-cli, run inside the container, as the
// replication user (which may PING and nothing else that matters here): the user and password
// are read from the mounted auth.conf (masteruser / masterauth), the password into valkey-cli's
// environment, never onto a command line that ps or an event would show.
// valkey-cli exits 0 on error replies, so the reply is what counts, stderr included (a refused
// AUTH is reported there). Alive: PONG, and the replies of a server that answers but cannot
// serve yet (LOADING a dataset, MASTERDOWN while a replica's link is down), refuses the
// credentials (NOAUTH: a credential problem is the operator's to report, never a reason to kill
// every node of a cluster at once), or is full ("max number of clients reached": Valkey counts
// the cluster bus links in maxclients, so a low maxclients, or applications filling it, would
// otherwise fail the probe on every node at once; break test: maxclients 16 and a 3 -> 4, every
// pod killed, every shard lost). Not alive: no reply within the timeout (hung, or stopped), a
// refused connection, BUSY (a script that will not end), anything else.
// cliTLS is what valkey-cli needs for the port under TLS: TLS without verifying the server's
// certificate. valkey-cli reaches its own pod's server at 127.0.0.1, so verification proves
// nothing, and it would tie every node's life to the mounted Secret: the volume follows the
// Secret, so an update with a missing, empty or foreign ca.crt (the cluster goes Invalid while
// the servers keep the certificate they loaded) would fail the probe on every node at once and
// kill the whole cluster (break test: 5 of 6 nodes of a 3x1 within 15 s). Clients are asked for
// no certificate (tls-auth-clients no), so none is given.
func cliTLS(vc *v1.ValkeyCluster) string {
	if vc.Spec.TLS == nil {
		return ""
	}
	return " --tls --insecure"
}

func livenessScript(vc *v1.ValkeyCluster) string {
	return fmt.Sprintf(`user=$(sed -n 's/^masteruser //p' %[1]s/%[2]s)
pw=$(sed -n 's/^masterauth //p' %[1]s/%[2]s)
reply=$(REDISCLI_AUTH="$pw" VALKEYCLI_AUTH="$pw" valkey-cli --no-auth-warning%[4]s --user "$user" -p %[3]d PING 2>&1)
case "$reply" in *PONG*|*LOADING*|*MASTERDOWN*|*NOAUTH*|*"max number of clients"*) exit 0 ;; esac
echo "PING: ${reply:-no reply}"
exit 1
`, secretMountPath, AuthFileName, ClientPort, cliTLS(vc))
}

// livenessProbe is the pod's only probe, as the original's pods carry (concepts/pod-management):
// it turns a hung server into a dead pod. There is no readiness probe: clients find nodes
// through the cluster protocol, not through Service endpoints, and a readiness gate would be a
// second, conflicting view of a node's health. Under TLS the PING goes over TLS (cliTLS).
func livenessProbe(vc *v1.ValkeyCluster) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", livenessScript(vc)}}},
		PeriodSeconds:    livenessPeriodSeconds,
		TimeoutSeconds:   livenessTimeoutSeconds,
		FailureThreshold: livenessFailureThreshold,
	}
}

// The preStop hook of a Valkey 8 pod holds SIGTERM back so that a deleted primary's slots are
// handed over while it still serves (plan/failover.go, rule 4b): preStopDelaySeconds for every
// pod, then, up to preStopLimitSeconds, for as long as the server is still a primary with a
// connected replica. The delay is time for the operator to see the deletion (a watch event, then
// a pass) and for the graceful CLUSTER FAILOVER it issues on a synced replica to complete (the
// replica catches up with the primary, which pauses its writers meanwhile, then takes over); the
// old primary then answers MOVED until the delay is over, so clients learn the new owner from it
// rather than from a refused connection. The extension is for a node that held several
// primaries (a drained Kubernetes node): the operator hands over one shard per pass, each after
// the previous one completed, and on a loaded machine the last of three was still a primary at
// SIGTERM (measured: its shard refused writes for 3.6 s, until FAILOVER FORCE on its replica). A
// primary without a connected replica has nobody to hand over to, and a server that does not
// answer cannot tell: neither is held beyond the delay. The hook ends within
// terminationGracePeriodSeconds (30), leaving the server at least 7 s to shut down (10 s unless it
// handed over by itself at the very end: movedHoldSeconds).
const (
	preStopDelaySeconds = 5
	preStopLimitSeconds = 20
)

// preStopScript waits delay seconds, then while the server says (ROLE) it is a primary with an
// online replica, until limit seconds have passed since it began. It authenticates as the
// liveness script does: the replication user and its password from the mounted auth.conf, the
// password through the environment. ROLE is the one command that user has for this (see
// the replication commands of package acl); the operator's own password is never in the pod. Any other reply (a
// replica, an error, no answer) ends the hold: valkey-cli prints ROLE of a primary as "master",
// its offset, then ip, port and offset per online replica, so more than two words means one.
//
// A primary still serving after the delay was not handed over by the operator (it was killed,
// or had lost its lease, between the deletion and its failover): the hook then hands over by
// itself, with a graceful CLUSTER FAILOVER on the replica furthest along (the largest offset in
// ROLE), again every handoverRetrySeconds while it is still a primary (a failover that lost its
// election to another shard's, or timed out, is tried again). Without it the server held on to
// the limit, exited, and its slots refused writes until Valkey's own failover (measured 8.7 s
// with the operator killed mid-handover). The graceful failover loses nothing: the primary
// pauses its writers until the replica has caught up with it. Over TLS the replica is reached by
// IP and its certificate checked against the cluster's CA (as Valkey's own cluster bus and
// replication check a peer), never --insecure off the pod. A server it handed over is held
// movedHoldSeconds more.
func preStopScript(vc *v1.ValkeyCluster, delay, limit int) string {
	return fmt.Sprintf(`start=$(date +%%s)
sleep %[4]d
user=$(sed -n 's/^masteruser //p' %[1]s/%[2]s)
pw=$(sed -n 's/^masterauth //p' %[1]s/%[2]s)
cli() { REDISCLI_AUTH="$pw" VALKEYCLI_AUTH="$pw" timeout 2 valkey-cli --no-auth-warning --user "$user" "$@" 2>/dev/null; }
asked=0
while [ $(($(date +%%s) - start)) -lt %[5]d ]; do
  set -- $(cli%[6]s -p %[3]d ROLE)
  now=$(date +%%s)
  if [ "$1" != master ] || [ $# -le 2 ]; then
    [ $asked -gt 0 ] && sleep %[9]d
    exit 0
  fi
  if [ $((now - asked)) -ge %[8]d ]; then
    asked=$now
    shift 2
    ip= port= off=-1
    while [ $# -ge 3 ]; do
      if [ "$3" -gt "$off" ] 2>/dev/null; then ip=$1 port=$2 off=$3; fi
      shift 3
    done
    [ -n "$ip" ] && cli%[7]s -h "$ip" -p "$port" CLUSTER FAILOVER >/dev/null
  fi
  sleep 0.2
done
`, secretMountPath, AuthFileName, ClientPort, delay, limit, cliTLS(vc), peerTLS(vc), handoverRetrySeconds, movedHoldSeconds)
}

// movedHoldSeconds is how long a server the hook handed over keeps answering (MOVED, to the
// replica that took over) once it is one no more, before it exits: clients learn the new owner
// from it, as they do in the rest of the delay after the operator's own handover, rather than
// from a refused connection (measured without it: its slots refused writes for 1.4 s, the
// clients dialling a pod gone). At most the limit plus this: 23 s of the 30 s grace period.
const movedHoldSeconds = 3

// handoverRetrySeconds is how often the preStop hook asks again for a handover that has not
// happened: a graceful failover completes in well under a second, or gives up after Valkey's
// manual failover timeout (5 s); asked again sooner, it would start over (the primary pausing
// its writers again) and abandon the election in progress.
const handoverRetrySeconds = 6

// peerTLS is valkey-cli's TLS flags for another node of a TLS cluster: its certificate verified
// against the mounted CA.
func peerTLS(vc *v1.ValkeyCluster) string {
	if vc.Spec.TLS == nil {
		return ""
	}
	return " --tls --cacert " + TLSMountPath + "/" + tlsmaterial.CAKey
}

// preStop holds SIGTERM back on Valkey 8 (see preStopScript). On 9.x the server hands over
// itself on SIGTERM (shutdown-on-sigterm failover), and the pod has no hook.
func preStop(vc *v1.ValkeyCluster, img v1.ValkeyImageSpec) *corev1.Lifecycle {
	if version.Parse(img.Version).HandsOverOnSIGTERM() {
		return nil
	}
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{"/bin/sh", "-c", preStopScript(vc, preStopDelaySeconds, preStopLimitSeconds)},
	}}}
}
