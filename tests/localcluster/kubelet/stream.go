package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// Interactive containers, `kubectl exec` and `kubectl attach`.
//
// A container whose spec asks for stdin or a tty (what `kubectl run -i` / `-it` creates) does not
// write straight to its log file as the others do: the kubelet holds the other end of its stdin
// (a pipe) or of its terminal (a pseudo-terminal, the container's controlling tty), and copies
// everything it prints both to the log file and to the clients attached at that moment, as a
// container runtime's shim does. What was printed before a client attached is only in the log
// (kubectl says "If you don't see a command prompt, try pressing enter." for that reason).
// stdinOnce closes the container's stdin when the first attached client closes its own (the end
// of a piped `kubectl run -i`), so a program reading to EOF finishes.
//
// `kubectl attach` to a container without stdin or tty streams its log from that moment.
// `kubectl exec` runs the command inside the container's namespaces (network, mounts, hostname,
// IPC) with the container's environment, user and working directory, on a pseudo-terminal of its
// own when a tty is asked for; a non-zero exit reaches the client as the exit code.
//
// The wire protocols (SPDY and WebSocket remotecommand, as the API server proxies them) are
// virtual-kubelet's node/api; this file only supplies the processes behind them.

// streamIdleTimeout closes an exec or attach session that moved no data for this long (a real
// kubelet's --streaming-connection-idle-timeout defaults to 4 h; an interactive client in a test
// or a demo may sit at its prompt for minutes).
const streamIdleTimeout = time.Hour

// containerIO is an interactive container's stdin/tty and the clients attached to its output.
type containerIO struct {
	tty       bool
	stdinOnce bool
	// childFiles are the container's ends, closed here once it started.
	childFiles []*os.File
	// stdin is what clients write to: the pipe to the container's stdin or the terminal's
	// master side; nil when the container has no stdin.
	stdin io.WriteCloser
	// master is the terminal's master side (tty only).
	master *os.File
	// outputs are the pipes of stdout and stderr (without a tty).
	outputs [2]*os.File
	log     *os.File

	mu          sync.Mutex
	attached    map[*attachment]struct{}
	stdinClosed bool
	// done is closed once the container's output has ended (every writer closed).
	done chan struct{}
}

// attachment is one attached client; failed is closed when writing to it failed (it is gone).
type attachment struct {
	stdout, stderr io.Writer
	failed         chan struct{}
	once           sync.Once
}

func (a *attachment) fail() { a.once.Do(func() { close(a.failed) }) }

// interactive reports whether a container needs the kubelet to hold its stdin or terminal.
func interactive(c *corev1.Container) bool { return c.Stdin || c.TTY }

// newContainerIO replaces cmd's stdio (the log file that buildCommand opened) by a terminal or
// pipes that the kubelet holds. Call afterStart once cmd has started.
func newContainerIO(spec *corev1.Container, cmd *exec.Cmd) (*containerIO, error) {
	logFile, _ := cmd.Stdout.(*os.File)
	cio := &containerIO{
		tty: spec.TTY, stdinOnce: spec.StdinOnce, log: logFile,
		attached: map[*attachment]struct{}{}, done: make(chan struct{}),
	}
	if spec.TTY {
		master, slave, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("container %s: open a terminal: %w", spec.Name, err)
		}
		cio.master, cio.childFiles = master, []*os.File{slave}
		if spec.Stdin {
			cio.stdin = master
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		setControllingTTY(cmd)
		return cio, nil
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, outR, outW)
		return nil, err
	}
	cio.stdin, cio.outputs = stdinW, [2]*os.File{outR, errR}
	cio.childFiles = []*os.File{stdinR, outW, errW}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	return cio, nil
}

// setControllingTTY makes the process the leader of a new session whose controlling terminal
// is its stdin, as a container runtime does for a tty container (a shell then gets job control
// and ^C). A session leader is its own process group leader, so the kill(-pid) of the rest of
// this package still reaches its whole group.
func setControllingTTY(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = false // setpgid would fail for a session leader
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// afterStart closes the container's ends of the pipes (so that its exit ends the output) and
// starts copying its output to the log and the attached clients; abandon frees everything of a
// container that could not start.
func (cio *containerIO) afterStart() {
	closeAll(cio.childFiles...)
	var wg sync.WaitGroup
	if cio.tty {
		wg.Go(func() { cio.copyOut(cio.master, false) })
	} else {
		wg.Go(func() { cio.copyOut(cio.outputs[0], false) })
		wg.Go(func() { cio.copyOut(cio.outputs[1], true) })
	}
	go func() {
		wg.Wait()
		cio.mu.Lock()
		if cio.stdin != nil && !cio.stdinClosed {
			cio.stdinClosed = true
			_ = cio.stdin.Close()
		}
		cio.mu.Unlock()
		if cio.master != nil {
			_ = cio.master.Close()
		}
		for _, f := range cio.outputs {
			if f != nil {
				_ = f.Close()
			}
		}
		if cio.log != nil {
			_ = cio.log.Close()
		}
		close(cio.done)
	}()
}

func (cio *containerIO) abandon() {
	closeAll(cio.childFiles...)
	if cio.master != nil {
		_ = cio.master.Close()
	}
	for _, f := range cio.outputs {
		if f != nil {
			_ = f.Close()
		}
	}
	if cio.stdin != nil {
		_ = cio.stdin.Close()
	}
	if cio.log != nil {
		_ = cio.log.Close()
	}
}

// copyOut copies one output stream of the container to the log and to every attached client
// until the container's side is closed (for a terminal, reading the master fails with EIO then).
func (cio *containerIO) copyOut(r *os.File, stderr bool) {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			cio.mu.Lock()
			if cio.log != nil {
				_, _ = cio.log.Write(buf[:n])
			}
			for a := range cio.attached {
				w := a.stdout
				if stderr && a.stderr != nil {
					w = a.stderr
				} else if stderr {
					continue
				}
				if w == nil {
					continue
				}
				if _, werr := w.Write(buf[:n]); werr != nil {
					delete(cio.attached, a)
					a.fail()
				}
			}
			cio.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// closeStdin gives the container EOF on its stdin (not with a terminal: there, the client's
// ^D is that EOF).
func (cio *containerIO) closeStdin() {
	if cio.tty {
		return
	}
	cio.mu.Lock()
	defer cio.mu.Unlock()
	if cio.stdin != nil && !cio.stdinClosed {
		cio.stdinClosed = true
		_ = cio.stdin.Close()
	}
}

// attach streams the container's output to the client and the client's input to the container
// until the output ends, the client goes away or ctx ends.
func (cio *containerIO) attach(ctx context.Context, aio api.AttachIO) {
	a := &attachment{failed: make(chan struct{})}
	if out := aio.Stdout(); out != nil {
		a.stdout = out
	}
	if errw := aio.Stderr(); errw != nil {
		a.stderr = errw
	}
	cio.mu.Lock()
	cio.attached[a] = struct{}{}
	cio.mu.Unlock()
	defer func() {
		cio.mu.Lock()
		delete(cio.attached, a)
		cio.mu.Unlock()
	}()
	if in := aio.Stdin(); in != nil && cio.stdin != nil {
		go func() {
			// A write to a stdin closed meanwhile (the container ended) ends the copy.
			_, _ = io.Copy(cio.stdin, in)
			if cio.stdinOnce {
				cio.closeStdin()
			}
		}()
	}
	if aio.TTY() && cio.master != nil {
		go resizeLoop(ctx, cio.master, aio.Resize())
	}
	select {
	case <-cio.done:
	case <-a.failed:
	case <-ctx.Done():
	}
}

func resizeLoop(ctx context.Context, master *os.File, sizes <-chan api.TermSize) {
	if sizes == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-sizes:
			if !ok {
				return
			}
			_ = pty.Setsize(master, &pty.Winsize{Rows: s.Height, Cols: s.Width})
		}
	}
}

// runningContainer finds a container of a pod on this node whose process runs.
func (k *Kubelet) runningContainer(node, namespace, podName, container string) (*podRuntime, *containerState, error) {
	p, err := k.pod(namespace, podName)
	if err != nil || p.node != node {
		return nil, nil, fmt.Errorf("pod %s/%s not found on node %s", namespace, podName, node)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.containers {
		if c.spec.Name != container {
			continue
		}
		if c.proc == nil || c.exited {
			return nil, nil, fmt.Errorf("container %s of pod %s/%s is not running", container, namespace, podName)
		}
		return p, c, nil
	}
	return nil, nil, fmt.Errorf("container %s not found in pod %s/%s", container, namespace, podName)
}

// attachToContainer is virtual-kubelet's AttachToContainer hook (`kubectl attach`, `kubectl run -i`).
func (k *Kubelet) attachToContainer(node string) api.ContainerAttachHandlerFunc {
	return func(ctx context.Context, namespace, podName, container string, aio api.AttachIO) error {
		p, c, err := k.runningContainer(node, namespace, podName, container)
		if err != nil {
			return err
		}
		p.mu.Lock()
		cio, exitCh := c.io, c.exitCh
		p.mu.Unlock()
		if cio != nil {
			cio.attach(ctx, aio)
			return nil
		}
		// Not interactive: its output goes straight to the log file; follow that.
		if out := aio.Stdout(); out != nil {
			return k.writeLogs(ctx, out, p, container, exitCh, logOptions{tail: 0, limit: -1, follow: true})
		}
		select {
		case <-exitCh:
		case <-ctx.Done():
		}
		return nil
	}
}

// runInContainer is virtual-kubelet's RunInContainer hook (`kubectl exec`).
func (k *Kubelet) runInContainer(node string) api.ContainerExecHandlerFunc {
	return func(ctx context.Context, namespace, podName, container string, command []string, aio api.AttachIO) error {
		if len(command) == 0 {
			return errors.New("exec: no command")
		}
		p, c, err := k.runningContainer(node, namespace, podName, container)
		if err != nil {
			return err
		}
		p.mu.Lock()
		pid, spec := c.proc.Pid, c.spec
		p.mu.Unlock()
		pod := p.podCopy()
		args := []string{"--target", strconv.Itoa(pid), "--net", "--mount", "--uts", "--ipc", "--wd"}
		if uid, gid, _ := runAs(pod, &spec); uid != nil {
			g := int64(0)
			if gid != nil {
				g = *gid
			}
			args = append(args, fmt.Sprintf("--setuid=%d", *uid), fmt.Sprintf("--setgid=%d", g))
		}
		args = p.inCgroup(spec.Name, append(append(append([]string{"/usr/bin/nsenter"}, args...), "--"), command...))
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = p.probeEnv(spec)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		if aio.TTY() {
			err = runOnTerminal(ctx, cmd, aio)
		} else {
			if in := aio.Stdin(); in != nil {
				cmd.Stdin = in
			}
			if out := aio.Stdout(); out != nil {
				cmd.Stdout = out
			}
			if errw := aio.Stderr(); errw != nil {
				cmd.Stderr = errw
			}
			err = cmd.Run()
		}
		return exitError(err)
	}
}

// runOnTerminal runs cmd with a new pseudo-terminal as its controlling tty, copying the
// client's input to it and its output to the client.
func runOnTerminal(ctx context.Context, cmd *exec.Cmd, aio api.AttachIO) error {
	master, slave, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open a terminal: %w", err)
	}
	defer func() { _ = master.Close() }()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	setControllingTTY(cmd)
	err = cmd.Start()
	_ = slave.Close()
	if err != nil {
		return err
	}
	go resizeLoop(ctx, master, aio.Resize())
	if in := aio.Stdin(); in != nil {
		go func() { _, _ = io.Copy(master, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if out := aio.Stdout(); out != nil {
			_, _ = io.Copy(out, master) // ends with EIO once the command and its children are gone
		} else {
			_, _ = io.Copy(io.Discard, master)
		}
	}()
	err = cmd.Wait()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return err
}

// exitError turns a command's exit into what virtual-kubelet reports as the exit code.
func exitError(err error) error {
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil // exited 0; only an I/O copy (the client's open stdin) was left behind
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return utilexec.CodeExitError{Err: err, Code: code}
	}
	return err
}
