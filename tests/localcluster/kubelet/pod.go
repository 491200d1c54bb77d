package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// startRetryPeriod is how often a pod whose ConfigMap, Secret or image is
	// missing tries to start again.
	startRetryPeriod = 2 * time.Second
	// volumeResyncPeriod is how often ConfigMap, Secret, downward API and
	// projected volumes are brought up to date (a kubelet takes up to about a
	// minute; tests want less).
	volumeResyncPeriod = 2 * time.Second
	defaultPath        = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// nonRootUID runs a runAsNonRoot container that names no runAsUser.
	nonRootUID = 65532
)

// podRuntime is one pod on one node: its sandbox (netns, IP), volumes and one
// process per container.
type podRuntime struct {
	k     *Kubelet
	node  string
	key   string
	dirty chan struct{}
	ctx   context.Context // ends when the pod is finished or destroyed
	stop  context.CancelFunc

	mu          sync.Mutex
	pod         *corev1.Pod
	startTime   metav1.Time
	slot        int
	hasSlot     bool
	sandbox     bool
	containers  []*containerState
	terminating bool
	killTimer   *time.Timer
	killAt      time.Time
	lost        bool // the node lost power
	replaced    bool // a new pod of the same name is waiting: report nothing more
	finished    bool // terminating and every process is gone
	gone        bool // removed from the runtime
	vols        *volumeSet
	cgroups     bool // the pod's cgroups exist (resize.go)
	// The PodResizePending and PodResizeInProgress conditions, nil when not set (resize.go).
	resizePending, resizeInProgress *corev1.PodCondition
}

// containerState is one container's process and what the status reports.
type containerState struct {
	spec           corev1.Container
	proc           *os.Process
	io             *containerIO // stdin/tty and attached clients; nil unless interactive (stream.go)
	exitCh         chan struct{}
	started        bool
	startedAt      time.Time
	exited         bool
	finishedAt     time.Time
	exitCode       int32
	reason         string
	message        string
	ready          bool
	waitingReason  string
	waitingMessage string
	// allocated is what the kubelet admitted for the container, actuated what its cgroup holds
	// (nil until it has one): see resize.go.
	allocated corev1.ResourceRequirements
	actuated  *corev1.ResourceRequirements
}

func newPodRuntime(k *Kubelet, node string, pod *corev1.Pod) *podRuntime {
	ctx, cancel := context.WithCancel(k.ctx)
	p := &podRuntime{
		k: k, node: node, key: pod.Namespace + "/" + pod.Name, dirty: make(chan struct{}, 1),
		ctx: ctx, stop: cancel, pod: pod.DeepCopy(), startTime: metav1.Now(),
	}
	for _, c := range pod.Spec.Containers {
		p.containers = append(p.containers, &containerState{
			spec: c, exitCh: make(chan struct{}), waitingReason: "ContainerCreating",
			allocated: *c.Resources.DeepCopy(),
		})
	}
	p.vols = newVolumeSet(k, p)
	return p
}

func (p *podRuntime) uid() types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pod.UID
}

func (p *podRuntime) start() {
	go p.notifyLoop()
	p.changed()
	go p.run()
}

// changed asks the notify loop to report the pod's current status.
func (p *podRuntime) changed() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// notifyLoop reports status to the node's pod controller, newest state last.
// After reporting a finished pod it releases the pod's resources.
func (p *podRuntime) notifyLoop() {
	for {
		select {
		case <-p.dirty:
		case <-p.k.ctx.Done():
			return
		}
		snap := p.snapshot()
		p.mu.Lock()
		finished := p.finished
		p.mu.Unlock()
		notify := p.k.notifier(p.node)
		p.mu.Lock()
		if p.replaced {
			// The pod object with this name is a newer pod now.
			notify = nil
		}
		p.mu.Unlock()
		if notify != nil {
			notify(snap)
		}
		if finished {
			if notify != nil {
				p.confirmDeletion(snap)
			}
			p.release()
			return
		}
	}
}

// confirmDeletion removes a deleted pod's object as soon as its processes
// are gone, as a kubelet does (a delete with grace 0). virtual-kubelet alone
// would confirm only when the whole grace period has passed. The terminal
// status is given a moment to be written first, so watchers see how the
// containers ended.
func (p *podRuntime) confirmDeletion(snap *corev1.Pod) {
	ctx, cancel := context.WithTimeout(p.k.ctx, 10*time.Second)
	defer cancel()
	pods := p.k.client.CoreV1().Pods(snap.Namespace)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := pods.Get(ctx, snap.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != snap.UID) {
			return
		}
		if err == nil && (cur.DeletionTimestamp == nil ||
			cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	cur, err := pods.Get(ctx, snap.Name, metav1.GetOptions{})
	if err != nil || cur.UID != snap.UID || cur.DeletionTimestamp == nil {
		return // not deleted in the API (the provider was told by a resync)
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(snap.UID))}
	if err := pods.Delete(ctx, snap.Name, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.V(2).InfoS("confirm pod deletion", "pod", p.key, "err", err)
	}
}

func (p *podRuntime) update(pod *corev1.Pod) {
	p.mu.Lock()
	if pod.UID != p.pod.UID {
		p.mu.Unlock()
		return
	}
	status := p.pod.Status
	p.pod = pod.DeepCopy()
	p.pod.Status = status
	p.mu.Unlock()
	// A resize (pods/resize changes spec.containers[].resources), or a newer generation to report.
	p.k.syncResize(p)
}

func (p *podRuntime) sandboxSlot() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slot, p.sandbox
}

func (p *podRuntime) podIP() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hasSlot {
		return ""
	}
	return p.k.ipam.ip(p.slot)
}

func (p *podRuntime) logPath(container string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return filepath.Join(p.k.logDir(p.pod), container+".log")
}

func (p *podRuntime) podCopy() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pod.DeepCopy()
}

// run prepares the pod and starts its containers; problems that a real
// kubelet would wait out (a missing ConfigMap, Secret or image) leave the pod
// Pending and are retried.
func (p *podRuntime) run() {
	slot, err := p.k.ipam.allocate()
	if err != nil {
		p.setWaiting("CreatePodSandboxError", err.Error())
		return
	}
	p.mu.Lock()
	p.slot, p.hasSlot = slot, true
	p.mu.Unlock()

	var cmds []*exec.Cmd
	for {
		if p.abandonStart() {
			return
		}
		cmds, err = p.prepare()
		if err == nil {
			break
		}
		klog.V(2).InfoS("pod not ready to start", "pod", p.key, "err", err)
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(startRetryPeriod):
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminating || p.lost || p.gone {
		p.markUnstartedLocked()
		return
	}
	for i, c := range p.containers {
		cmd := cmds[i]
		var cio *containerIO
		if interactive(&c.spec) {
			cio, err = newContainerIO(&c.spec, cmd)
		}
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			if cio != nil {
				cio.abandon()
			} else if f, ok := cmd.Stdout.(*os.File); ok {
				_ = f.Close()
			}
			c.exited, c.exitCode, c.reason, c.message = true, 128, "StartError", err.Error()
			c.finishedAt = time.Now()
			close(c.exitCh)
			err = nil
			continue
		}
		c.proc, c.started, c.startedAt, c.waitingReason, c.waitingMessage = cmd.Process, true, time.Now(), "", ""
		if cio != nil {
			// The kubelet holds the container's stdin or terminal and copies its output.
			c.io = cio
			cio.afterStart()
		} else if cmd.Stdout != nil {
			// The child holds its own copy of the log file.
			_ = cmd.Stdout.(*os.File).Close()
		}
		go p.wait(c, cmd)
		go p.probe(c)
	}
	go p.resyncVolumes()
	p.changed()
}

// abandonStart reports whether the pod stopped wanting to start.
func (p *podRuntime) abandonStart() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminating || p.lost || p.gone {
		p.markUnstartedLocked()
		return true
	}
	return false
}

// markUnstartedLocked gives containers that never started a terminated state,
// and finishes a terminating pod that has nothing left to stop.
func (p *podRuntime) markUnstartedLocked() {
	for _, c := range p.containers {
		if !c.started && !c.exited {
			c.exited, c.exitCode, c.reason, c.finishedAt = true, 137, "ContainerStatusUnknown", time.Now()
			c.message = "the container could not be started before the pod stopped"
			close(c.exitCh)
		}
	}
	p.checkFinishedLocked()
}

func (p *podRuntime) setWaiting(reason, msg string) {
	p.mu.Lock()
	for _, c := range p.containers {
		if !c.started && !c.exited {
			c.waitingReason, c.waitingMessage = reason, msg
		}
	}
	p.mu.Unlock()
	p.changed()
}

// prepare makes the sandbox and volumes and builds every container's command.
func (p *podRuntime) prepare() ([]*exec.Cmd, error) {
	if n := len(p.podCopy().Spec.InitContainers); n > 0 {
		err := fmt.Errorf("%d init container(s): init containers are not supported by the local kubelet", n)
		p.setWaiting("CreateContainerConfigError", err.Error())
		return nil, err
	}
	if err := p.vols.sync(); err != nil {
		p.setWaiting("CreateContainerConfigError", err.Error())
		return nil, err
	}
	pod := p.podCopy()
	resolv, err := p.writeResolvConf(pod)
	if err != nil {
		p.setWaiting("CreatePodSandboxError", err.Error())
		return nil, err
	}
	if err := p.createCgroups(); err != nil {
		p.setWaiting("CreateContainerError", err.Error())
		return nil, err
	}
	var cmds []*exec.Cmd
	for _, c := range pod.Spec.Containers {
		cmd, err := p.buildCommand(pod, &c, resolv)
		if err != nil {
			p.setWaiting("CreateContainerConfigError", err.Error())
			return nil, err
		}
		cmds = append(cmds, cmd)
	}
	p.mu.Lock()
	slot, haveSandbox := p.slot, p.sandbox
	p.mu.Unlock()
	if !haveSandbox {
		if err := p.k.ipam.createSandbox(slot); err != nil {
			p.setWaiting("CreatePodSandboxError", err.Error())
			return nil, err
		}
		p.mu.Lock()
		p.sandbox = true
		p.mu.Unlock()
	}
	return cmds, nil
}

// buildCommand runs the container as
//
//	nsenter --net=<pod netns> unshare --mount --uts --ipc --propagation private \
//	  sh -c '<hostname; bind mounts; cd workingDir; exec setpriv ...>' sh <command...>
//
// so the process that is started (and signalled) is, after the execs, the
// container's own command.
func (p *podRuntime) buildCommand(pod *corev1.Pod, c *corev1.Container, resolvConf string) (*exec.Cmd, error) {
	env, err := p.k.resolveEnv(pod, c, p.podIP())
	if err != nil {
		return nil, err
	}
	argv, err := p.k.entrypoint(c, env)
	if err != nil {
		return nil, err
	}
	uid, gid, groups := runAs(pod, c)

	var script strings.Builder
	// Into the container's cgroup first (nsenter and unshare exec'd without making a process).
	script.WriteString(p.cgroupJoinScript(c.Name))
	script.WriteString("set -e\n")
	// o makes the directories above a mount point that the container's user could not pass
	// through reachable, as an image's root filesystem does: a container runtime creates a
	// missing mount point's directories 0755 in the image, whereas this kubelet shares the host's
	// file system, where a package may own one (Debian's valkey-server makes /etc/valkey 2770 for
	// its own user, which would hide /etc/valkey/acl from uid 999). Such a directory gets an
	// empty tmpfs of mode 0755 over it, in the container's mount namespace only.
	script.WriteString(`o() { d=""; rest="${1#/}"; while [ "${rest#*/}" != "$rest" ]; do part="${rest%%/*}"; rest="${rest#*/}"; d="$d/$part"; ` +
		`if [ -d "$d" ]; then case "$(stat -c %A "$d")" in *x|*t) ;; *) mount -t tmpfs -o mode=755 tmpfs "$d" ;; esac; fi; done; }` + "\n")
	script.WriteString(`m() { o "$2"; if [ -d "$1" ]; then mkdir -p "$2"; else mkdir -p "$(dirname "$2")"; [ -e "$2" ] || : > "$2"; fi; ` +
		`mount --bind "$1" "$2"; if [ "$3" = ro ]; then mount -o remount,bind,ro "$2"; fi; }` + "\n")
	fmt.Fprintf(&script, "echo %s > /proc/sys/kernel/hostname\n", shellQuote(podHostname(pod)))
	if dir, ok := p.k.imageCommands(c.Image); ok {
		fmt.Fprintf(&script, "m %s %s ro\n", shellQuote(dir), shellQuote(ImageCommandsMountPath))
	}
	mounts := append([]corev1.VolumeMount(nil), c.VolumeMounts...)
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].MountPath), "/") < strings.Count(filepath.Clean(mounts[j].MountPath), "/")
	})
	for _, m := range mounts {
		src, readOnly, err := p.vols.mountSource(m)
		if err != nil {
			return nil, err
		}
		mode := "rw"
		if readOnly || m.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(&script, "m %s %s %s\n", shellQuote(src), shellQuote(m.MountPath), mode)
	}
	// The pod's resolv.conf (dns.go) goes over the host's last, so a volume mounted at /etc does
	// not hide it; a volume mounted at /etc/resolv.conf itself is the pod's own choice and wins.
	if resolvConf != "" && !slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool {
		return filepath.Clean(m.MountPath) == hostResolvConf
	}) {
		fmt.Fprintf(&script, "m %s %s ro\n", shellQuote(resolvConf), hostResolvConf)
	}
	wd := c.WorkingDir
	if wd == "" {
		wd = "/"
	}
	fmt.Fprintf(&script, "mkdir -p %s; cd %s\n", shellQuote(wd), shellQuote(wd))
	var priv []string
	if uid != nil {
		g := int64(0)
		if gid != nil {
			g = *gid
		}
		priv = append(priv, fmt.Sprintf("--reuid=%d", *uid), fmt.Sprintf("--regid=%d", g))
		if len(groups) > 0 {
			var gs []string
			for _, x := range groups {
				gs = append(gs, strconv.FormatInt(x, 10))
			}
			priv = append(priv, "--groups="+strings.Join(gs, ","))
		} else {
			priv = append(priv, "--clear-groups")
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		priv = append(priv, "--nnp")
	}
	if len(priv) > 0 {
		// --pdeathsig keep: a uid change clears the parent-death signal.
		fmt.Fprintf(&script, "exec setpriv %s --pdeathsig keep -- \"$@\"\n", strings.Join(priv, " "))
	} else {
		script.WriteString("exec \"$@\"\n")
	}

	nsPath := "/run/netns/" + p.k.cfg.Network.netnsName(p.slot)
	args := append([]string{"--net=" + nsPath, "--", "unshare", "--mount", "--uts", "--ipc", "--propagation", "private",
		"--", "/bin/sh", "-c", script.String(), "sh"}, argv...)
	cmd := exec.Command("/usr/bin/nsenter", args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := os.MkdirAll(p.k.logDir(pod), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(p.k.logDir(pod), c.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	return cmd, nil
}

// ImageCommandsMountPath is where a container whose image matches Config.ImageCommands sees
// that folder; its bin/ comes first on the container's PATH.
const ImageCommandsMountPath = "/run/local-kubelet/image"

// imageCommands is the host folder that Config.ImageCommands gives image (the longest
// matching prefix), if any.
func (k *Kubelet) imageCommands(image string) (string, bool) {
	dir, best := "", -1
	for prefix, d := range k.cfg.ImageCommands {
		if strings.HasPrefix(image, prefix) && len(prefix) > best {
			dir, best = d, len(prefix)
		}
	}
	return dir, best >= 0
}

// entrypoint is the container's command and args: command[0], a bare name, is looked up in
// the image's folder of Config.ImageCommands (and then runs from where the container sees that
// folder), else on the host PATH; without a command, a known image's entrypoint
// (knownEntrypoints) makes the command from the args, else the image's repository names the
// host binary in Config.Images.
func (k *Kubelet) entrypoint(c *corev1.Container, env []string) ([]string, error) {
	vars := map[string]string{}
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		vars[name] = val
	}
	var argv []string
	if len(c.Command) > 0 {
		argv = append(append(argv, c.Command...), c.Args...)
	} else if ep, ok := knownEntrypoints[imageRepository(c.Image)]; ok {
		argv = ep(c.Args)
	} else {
		bin, ok := k.cfg.Images[imageRepository(c.Image)]
		if !ok {
			return nil, fmt.Errorf("container %s: no command and image %q has no host entrypoint in Config.Images", c.Name, c.Image)
		}
		argv = append([]string{bin}, c.Args...)
	}
	for i := range argv {
		argv[i] = expand(argv[i], vars)
	}
	if dir, ok := k.imageCommands(c.Image); ok {
		if _, err := os.Stat(filepath.Join(dir, "bin")); err != nil {
			return nil, fmt.Errorf("container %s: image %q takes its commands from %s: %w", c.Name, c.Image, dir, err)
		}
		if !strings.Contains(argv[0], "/") {
			if st, err := os.Stat(filepath.Join(dir, "bin", argv[0])); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				argv[0] = ImageCommandsMountPath + "/bin/" + argv[0]
				return argv, nil
			}
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	argv[0] = path
	return argv, nil
}

// knownEntrypoints stand in for the ENTRYPOINT and CMD of images whose containers often set
// only args: `kubectl run --image valkey/valkey:9.0 -- valkey-cli -c -h ...` (the original's
// quickstart) gives the container args and no command, so what runs is what the image's
// entrypoint makes of them. They come before Config.Images.
var knownEntrypoints = map[string]func(args []string) []string{
	"valkey/valkey":           valkeyImageEntrypoint,
	"docker.io/valkey/valkey": valkeyImageEntrypoint,
}

// valkeyImageEntrypoint is what the official valkey/valkey image's docker-entrypoint.sh does
// (CMD ["valkey-server"]): no args runs valkey-server; args that start with "-" or name a
// ".conf" file are valkey-server's; anything else is a command of the image (valkey-cli, sh,
// valkey-server itself) run as given. Its step down from root to the valkey user is not
// modelled: the pod's securityContext says who runs.
func valkeyImageEntrypoint(args []string) []string {
	switch {
	case len(args) == 0:
		return []string{"valkey-server"}
	case strings.HasPrefix(args[0], "-") || strings.HasSuffix(args[0], ".conf"):
		return append([]string{"valkey-server"}, args...)
	default:
		return append([]string(nil), args...)
	}
}

// imageRepository strips the tag and digest: "reg:5000/a/b:1.0@sha256:…" is
// "reg:5000/a/b".
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// runAs is the uid, gid and supplementary groups of the container's process
// (nil uid: stay root).
func runAs(pod *corev1.Pod, c *corev1.Container) (uid, gid *int64, groups []int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		uid, gid = psc.RunAsUser, psc.RunAsGroup
		if psc.FSGroup != nil {
			groups = append(groups, *psc.FSGroup)
		}
		groups = append(groups, psc.SupplementalGroups...)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	nonRoot := false
	if psc := pod.Spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil {
		nonRoot = *psc.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	switch {
	case uid == nil && nonRoot:
		// The image's USER is unknown; images built to run as non-root
		// (distroless "nonroot", kubebuilder's default) use 65532.
		uid = new(int64(nonRootUID))
	case uid == nil && gid != nil:
		uid = new(int64(0))
	}
	return uid, gid, groups
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// wait records the exit of a container's process.
func (p *podRuntime) wait(c *containerState, cmd *exec.Cmd) {
	// When the main process ends, whatever it left running in its process
	// group dies too, as a container runtime tears down the whole container.
	// Waiting without reaping first keeps the group id from being reused.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	p.killCgroup(c.spec.Name)
	err := cmd.Wait()
	oom := p.oomKilled(c.spec.Name)
	p.mu.Lock()
	c.exited, c.finishedAt, c.ready = true, time.Now(), false
	c.exitCode, c.reason = 0, "Completed"
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			c.exitCode, c.reason = 128+int32(ws.Signal()), "Error"
		default:
			c.exitCode, c.reason = int32(ws.ExitStatus()), "Error"
		}
	} else if err != nil {
		c.exitCode, c.reason, c.message = 128, "Error", err.Error()
	}
	if oom {
		// As a container runtime reports a container the kernel OOM-killed a process of.
		c.reason = "OOMKilled"
	}
	close(c.exitCh)
	p.checkFinishedLocked()
	p.mu.Unlock()
	p.changed()
}

// checkFinishedLocked marks a terminating pod finished once no process runs.
func (p *podRuntime) checkFinishedLocked() {
	if !p.terminating || p.finished {
		return
	}
	for _, c := range p.containers {
		if !c.exited {
			return
		}
	}
	p.finished = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	p.stop()
	p.changed()
}

// terminate is the graceful stop of a deleted pod.
func (p *podRuntime) terminate(grace int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if grace < 0 {
		grace = 0
	}
	at := time.Now().Add(time.Duration(grace) * time.Second)
	if p.terminating {
		if at.Before(p.killAt) && p.killTimer != nil && p.killTimer.Stop() {
			p.killAt = at
			p.killTimer = time.AfterFunc(time.Until(at), p.kill)
		}
		return
	}
	p.terminating, p.killAt = true, at
	for _, c := range p.containers {
		if c.proc == nil || c.exited {
			continue
		}
		// As a kubelet does: a container's preStop exec hook runs first, within the grace
		// period, and SIGTERM follows when it ends (or when the grace period is over).
		if h := c.spec.Lifecycle; grace > 0 && h != nil && h.PreStop != nil && h.PreStop.Exec != nil && len(h.PreStop.Exec.Command) > 0 {
			go p.preStop(c, c.spec, c.proc, at)
			continue
		}
		_ = c.proc.Signal(syscall.SIGTERM)
	}
	p.killTimer = time.AfterFunc(time.Until(at), p.kill)
	// run() checks terminating under the lock before it starts anything, so
	// containers that have not started yet never will.
	p.markUnstartedLocked()
}

// preStop runs the container's preStop exec hook inside its namespaces, as exec probes run,
// until it ends or the grace period (deadline) is over, then sends SIGTERM to the container.
// A hook that fails is logged and does not hold the stop back, as on a real kubelet.
func (p *podRuntime) preStop(c *containerState, spec corev1.Container, proc *os.Process, deadline time.Time) {
	ctx, cancel := context.WithDeadline(p.ctx, deadline)
	defer cancel()
	args := append([]string{"/usr/bin/nsenter", "--target", strconv.Itoa(proc.Pid), "--net", "--mount", "--uts", "--ipc", "--"}, spec.Lifecycle.PreStop.Exec.Command...)
	args = p.inCgroup(spec.Name, args)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = p.probeEnv(spec)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		klog.V(2).InfoS("preStop hook failed", "pod", p.key, "container", spec.Name, "err", err, "output", string(out))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.exited {
		_ = proc.Signal(syscall.SIGTERM)
	}
}

// replace stops the pod at once, silently: a newer pod has its name.
func (p *podRuntime) replace() {
	p.mu.Lock()
	p.replaced = true
	p.mu.Unlock()
	p.terminate(0)
}

// kill sends SIGKILL to every running container process.
func (p *podRuntime) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.containers {
		if c.proc != nil && !c.exited {
			// The whole process group (Setpgid: its id is the pid).
			_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		}
	}
}

// signal sends sig to every running container's process group.
func (p *podRuntime) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.containers {
		if c.proc != nil && !c.exited {
			_ = syscall.Kill(-c.proc.Pid, sig)
		}
	}
}

// powerLoss kills the pod's processes as a node losing power would.
func (p *podRuntime) powerLoss() {
	p.mu.Lock()
	p.lost = true
	p.mu.Unlock()
	p.kill()
}

// destroy kills the pod and frees everything without reporting (Stop).
func (p *podRuntime) destroy() {
	p.powerLoss()
	p.mu.Lock()
	chans := make([]chan struct{}, 0, len(p.containers))
	for _, c := range p.containers {
		if c.started {
			chans = append(chans, c.exitCh)
		}
	}
	p.mu.Unlock()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
		}
	}
	p.release()
}

// release removes the pod from the runtime, its network namespace and its
// volumes (logs stay under StateDir/logs).
func (p *podRuntime) release() {
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return
	}
	p.gone = true
	slot, hasSlot := p.slot, p.hasSlot
	dir := p.k.podDir(p.pod)
	p.mu.Unlock()
	p.stop()
	if hasSlot {
		p.k.ipam.deleteSandbox(slot)
		p.k.ipam.release(slot)
	}
	_ = os.RemoveAll(dir)
	p.removeCgroups()
	p.k.mu.Lock()
	if p.k.pods[p.key] == p {
		delete(p.k.pods, p.key)
	}
	p.k.mu.Unlock()
	// What the pod held on its node may let a deferred resize through.
	p.k.resizeRetry()
}

// snapshot is the pod with the status a kubelet would report now.
func (p *podRuntime) snapshot() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod := p.pod.DeepCopy()
	st := corev1.PodStatus{
		QOSClass:  p.pod.Status.QOSClass,
		HostIP:    p.k.cfg.Network.Gateway,
		HostIPs:   []corev1.HostIP{{IP: p.k.cfg.Network.Gateway}},
		StartTime: &p.startTime,
		// The generation of the spec this status reflects, as a v1.35+ kubelet reports it.
		ObservedGeneration: p.pod.Generation,
	}
	if p.hasSlot && p.sandbox {
		ip := p.k.ipam.ip(p.slot)
		st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	allExited, anyFailed, allStarted, allReady := true, false, true, true
	for _, c := range p.containers {
		cs := corev1.ContainerStatus{
			Name: c.spec.Name, Image: c.spec.Image, ImageID: c.spec.Image,
			Started: new(c.started && !c.exited), Ready: c.ready && !c.exited,
		}
		switch {
		case c.exited:
			cs.State.Terminated = &corev1.ContainerStateTerminated{
				ExitCode: c.exitCode, Reason: c.reason, Message: c.message,
				StartedAt: metav1.NewTime(c.startedAt), FinishedAt: metav1.NewTime(c.finishedAt),
			}
			if c.proc != nil {
				cs.ContainerID = fmt.Sprintf("local://%d", c.proc.Pid)
				cs.State.Terminated.ContainerID = cs.ContainerID
			}
			if c.exitCode != 0 {
				anyFailed = true
			}
		case c.started:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
			cs.ContainerID = fmt.Sprintf("local://%d", c.proc.Pid)
			allExited = false
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.waitingReason, Message: c.waitingMessage}
			allExited, allStarted = false, false
		}
		if !cs.Ready {
			allReady = false
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	switch {
	case allExited && anyFailed:
		st.Phase = corev1.PodFailed
	case allExited:
		st.Phase = corev1.PodSucceeded
	case allStarted:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	now := metav1.Now()
	prev := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range p.pod.Status.Conditions {
		prev[c.Type] = c
	}
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		c := corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now, ObservedGeneration: p.pod.Generation}
		if old, found := prev[t]; found && old.Status == s {
			c.LastTransitionTime = old.LastTransitionTime
		}
		prev[t] = c
		st.Conditions = append(st.Conditions, c)
	}
	cond(corev1.PodReadyToStartContainers, p.sandbox && !allExited, "")
	cond(corev1.PodInitialized, true, "")
	cond(corev1.ContainersReady, allReady, "ContainersNotReady")
	cond(corev1.PodReady, allReady, "ContainersNotReady")
	cond(corev1.PodScheduled, true, "")
	if st.Phase == corev1.PodFailed && p.lost {
		st.Reason, st.Message = "NodeLost", "the node lost power and the pod's processes died"
	}
	p.statusResourcesLocked(&st)
	if st.Phase == corev1.PodFailed || st.Phase == corev1.PodSucceeded {
		// A terminal pod has no resize to report, as a kubelet clears both conditions.
		p.resizePending, p.resizeInProgress = nil, nil
	}
	for _, c := range []*corev1.PodCondition{p.resizePending, p.resizeInProgress} {
		if c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	p.pod.Status = st // keeps condition transition times stable
	pod.Status = *st.DeepCopy()
	return pod
}
