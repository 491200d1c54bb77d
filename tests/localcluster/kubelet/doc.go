// Package kubelet is the local cluster's own kubelet: it registers a few
// zoned Nodes with a real kube-apiserver and runs the Pods bound to them as
// real local processes, so a Valkey pod is a real valkey-server listening on
// its own pod IP. There is no container runtime and no image is pulled; the
// image name is only recorded.
//
// # Using it
//
//	net := kubelet.NetworkConfig{Bridge: "vko0", CIDR: "10.244.0.0/16", Gateway: "10.244.0.1"}
//	_ = kubelet.TeardownNetwork(net)        // leftovers of a crashed run
//	err := kubelet.SetupNetwork(net)        // before the API server binds the gateway
//	k, err := kubelet.Start(ctx, kubelet.Config{
//		RESTConfig: adminConfig, Network: net,
//		Nodes:    []kubelet.NodeSpec{{Name: "node-a", Zone: "zone-a"}, ...},
//		StateDir: dir + "/kubelet",
//		APIServerHost: "10.244.0.1", APIServerPort: port, // KUBERNETES_SERVICE_HOST/PORT in pods
//		Images: map[string]string{"gomomento/valkey-operator": "/path/bin/valkey-operator"},
//		KubeletPortBase: 10250, // optional: `kubectl logs` (see below)
//		ClusterDNS: "10.244.0.1", // optional: the cluster DNS pods resolve through (see below)
//	})
//	...
//	k.Stop()                                // kills pods, removes their netns; Nodes stay
//	_ = kubelet.TeardownNetwork(net)
//
// Fault injection: KillPod (SIGKILL the pod's processes: the pod goes Failed),
// FreezePod / ThawPod (SIGSTOP / SIGCONT: a hung server, which only a liveness
// probe turns into a Failed pod),
// StopNode / StartNode (the node "loses power": processes die, lease and
// status stop, kube-controller-manager marks it NotReady after its
// --node-monitor-grace-period; when it comes back its pods are reported
// Failed with reason NodeLost), CutPodNetwork / RestorePodNetwork (the host
// side of the pod's veth down / up). LogPath gives a container's log file.
//
// Everything needs root.
//
// # What a pod gets
//
//   - Nodes and pods go through virtual-kubelet v1.14.1 (node.NodeController
//     for status and the node lease; node.PodController with this package's
//     provider for pods). Node labels, set when the Node is first registered
//     and left alone afterwards as a kubelet does (`kubectl label node`
//     sticks, across StopNode / StartNode too): kubernetes.io/hostname,
//     topology.kubernetes.io/zone, kubernetes.io/os=linux (plus
//     NodeSpec.Labels); allocatable 64 cpu, 256Gi memory (NodeSpec.Allocatable sets
//     others), 250 pods; InternalIP is the gateway address.
//   - A network namespace per pod ("<bridge>-pod<n>"), a veth pair on the
//     bridge ("<bridge>p<n>" on the host), a free address of the CIDR,
//     loopback up and a default route via the gateway. The host reaches every
//     pod IP directly.
//   - A mount, UTS and IPC namespace per container: the process is started as
//     nsenter --net=<netns> unshare --mount --uts --ipc --propagation private
//     sh -c '<set hostname; bind mounts; cd workingDir; exec setpriv ...>' so
//     that, after the execs, the started process is the container's command.
//     The hostname is spec.hostname or the pod name.
//   - The command: command+args with command[0] looked up on the host PATH
//     (an image's entrypoint is not known); a container without a command
//     runs Config.Images[<image repository>] with its args. An image that
//     matches a prefix of Config.ImageCommands (e.g. "valkey/valkey:9.") gets
//     that host folder bind-mounted read-only at ImageCommandsMountPath with
//     its bin/ first on PATH, so its command, exec probes and preStop hooks
//     run the image tag's own programs (Valkey 9 beside the host's 8). $(VAR) references
//     are expanded. runAsUser/runAsGroup (pod or container), fsGroup and
//     supplementalGroups are applied with setpriv (runAsNonRoot without a
//     runAsUser runs as 65532, the usual non-root image user;
//     allowPrivilegeEscalation false sets no_new_privs); workingDir defaults
//     to "/". A pod with init containers stays Pending with a message saying
//     they are not supported.
//   - Environment: PATH, HOSTNAME, HOME, KUBERNETES_SERVICE_HOST/PORT, then
//     envFrom and env with valueFrom fieldRef (including status.podIP),
//     resourceFieldRef, configMapKeyRef and secretKeyRef.
//   - Volumes: emptyDir, hostPath, configMap, secret, downwardAPI and projected
//     (serviceAccountToken through the TokenRequest API, configMap, secret,
//     downwardAPI) with items, defaultMode/mode, optional and subPath. They are
//     directories under StateDir/pods/<ns>_<pod>_<uid>/volumes, bind-mounted
//     at mountPath (configMap, secret, downwardAPI and projected read-only).
//     Mount points missing on the host are created there (mkdir -p, or an
//     empty file for a file subPath): the mount namespace shares the host's
//     file system, so e.g. /etc/valkey/acl or /var/run/secrets/... appear on the
//     host as empty directories. A host directory above a mount point that others
//     cannot pass through (Debian's /etc/valkey, 2770) gets an empty tmpfs of mode
//     0755 over it in the container's namespace, as a missing directory of an
//     image would be created. With fsGroup, volume files belong to that
//     group. ConfigMap/Secret/downward/projected volumes are resynced every 2 s
//     and swapped atomically through a "..data" symlink as the kubelet does;
//     subPath mounts see no updates, as on a real kubelet.
//   - DNS: with Config.ClusterDNS set (the local cluster runs CoreDNS there, on the gateway),
//     a pod of dnsPolicy ClusterFirst (the default) gets a resolv.conf as a kubelet writes it:
//     "nameserver <ClusterDNS>", "search <ns>.svc.<domain> svc.<domain> <domain>" plus the
//     host's search domains, "options ndots:5" (domain: Config.ClusterDomain, default
//     cluster.local). Default keeps the host's file, None takes spec.dnsConfig alone, and
//     spec.dnsConfig is merged into the others (dns.go). The file is
//     StateDir/pods/<ns>_<pod>_<uid>/resolv.conf, bind-mounted read-only over /etc/resolv.conf
//     in each container's mount namespace (after the volumes, so a volume at /etc cannot hide
//     it; a volume at /etc/resolv.conf itself wins); the host's own file is never changed. So
//     {hostname}.{subdomain}.{ns}.svc.<domain> of a pod behind a headless Service resolves
//     inside pods, exec probes and preStop hooks included. No /etc/hosts is written for the
//     pod (a kubelet's would map the pod's own hostname and FQDN to its IP).
//   - stdout and stderr of each container go to
//     StateDir/logs/<ns>_<pod>_<uid>/<container>.log (kept after deletion).
//
// # CPU and memory
//
// With Config.EnforceResources (cgroups.go), each container runs in a cgroup of its own below
// one of its pod (cgroup v1 here; Start fails naming a missing controller): limits.memory is
// memory.limit_in_bytes (and memsw), limits.cpu a CFS quota over 100 ms, requests.cpu the
// shares, as a kubelet writes them; exec probes, preStop hooks and `kubectl exec` run in the
// container's cgroup too. A process past the memory limit is OOM-killed by the kernel; the
// container's cgroup counts the kill and its status says terminated, OOMKilled (exit code 137
// when the main process was the one killed). Without it nothing is enforced.
//
// In-place resize (resize.go), enforced or not: a resize through the pods/resize subresource
// reaches the provider as UpdatePod; it is admitted against the node's allocatable and the
// other pods' allocated requests (PodResizePending Deferred when it does not fit, Infeasible
// when NodeSpec's CPU or memory manager policy forbids it for a Guaranteed pod), then applied to
// the running cgroups without restarting anything (PodResizeInProgress until done; reason Error
// while a memory limit would fall below the usage). The status reports
// containerStatuses[].resources (actual) and allocatedResources, the pod's resources and
// allocatedResources, and observedGeneration (on the status and on each condition), as a
// v1.37 kubelet does.
//
// # Status, probes and deletion
//
// Status is reported as a kubelet does: Pending (containers waiting with
// ContainerCreating, or CreateContainerConfigError while a ConfigMap, Secret
// or host binary is missing; the start is retried every 2 s instead of
// failing the pod), then Running with podIP/podIPs, hostIP, startTime,
// containerStatuses (containerID "local://<pid>") and the conditions
// PodScheduled, PodReadyToStartContainers, Initialized, ContainersReady and
// Ready. Ready follows the readiness probe (exec inside the container's
// namespaces, tcpSocket, httpGet; initialDelay, period, timeout, success and
// failure thresholds honoured); without one a running container is ready.
// A failed liveness or startup probe kills the container (an exec probe that
// times out is killed with its whole process group). restartPolicy is
// always treated as Never: when every process has exited the pod is
// Succeeded (all exit 0) or Failed (exit code, or 128+signal).
//
// Deletion: SIGTERM, SIGKILL after the grace period, and as soon as every
// process is gone the pod object is deleted with grace 0 (virtual-kubelet
// alone would wait for the whole grace period).
//
// # kubectl logs, exec, attach and run -i through the API server
//
// With Config.KubeletPortBase set, node i serves the kubelet API over HTTPS with a self-signed
// certificate on Gateway:KubeletPortBase+i, and publishes that port as the node's
// DaemonEndpoints.KubeletEndpoint. The routes are virtual-kubelet's node/api (SPDY and WebSocket
// streams), with this package's hooks behind them (stream.go, logs.go):
//   - /containerLogs (`kubectl logs`): the container's log file, with follow, tailLines and
//     limitBytes.
//   - /exec (`kubectl exec`): the command runs inside the container's namespaces with its
//     environment, user and working directory, on a pseudo-terminal of its own with -t; its exit
//     code reaches the client.
//   - /attach (`kubectl attach`, `kubectl run -i` / `-it`): a container whose spec has stdin or
//     tty gets a pipe or a pseudo-terminal (its controlling tty) held by the kubelet, whose
//     output goes to the log and to every attached client; stdinOnce ends the container's stdin
//     when the first client ends its own. Attaching to another container streams its log.
//
// The API server needs --kubelet-preferred-address-types=InternalIP. With
// Config.APIAuthority set (the local cluster sets it) the node's serving certificate is signed
// by that CA and a client must present a certificate it signed: the API server gets
// --kubelet-certificate-authority and --kubelet-client-certificate/-key from the same CA, so
// only it reaches the kubelet API. Without it, the serving certificate is self-signed, the API
// server must not set --kubelet-certificate-authority, and no client certificate is asked
// for (the kubelet package's own tests run so).
//
// # Not done
//
// Init and ephemeral containers, a per-pod /etc/hosts, container restarts (restartPolicy Always and
// OnFailure behave as Never), admission of a new pod against the node's allocatable (the scheduler's
// word is taken), pod-level resources (spec.resources), gRPC
// probes, port-forward through the API server, hostNetwork,
// subPathExpr, persistent volumes, postStart and HTTP preStop hooks (a preStop exec hook
// runs inside the container before SIGTERM, within the grace period); readOnlyRootFilesystem,
// capabilities (beyond what dropping root implies) and seccomp are ignored.
package kubelet
