package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs the container's startup, readiness and liveness probes with
// their periods and thresholds. Without a readiness probe the container is
// ready once it runs (and its startup probe, if any, has passed). A failed
// liveness or startup probe kills the container; with restartPolicy Never
// that fails the pod, as on a real kubelet.
func (p *podRuntime) probe(c *containerState) {
	p.mu.Lock()
	spec, exitCh := c.spec, c.exitCh
	pid := c.proc.Pid
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	go func() {
		select {
		case <-exitCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	env := p.probeEnv(spec)

	if spec.StartupProbe != nil {
		if !p.runProbe(ctx, spec, pid, env, spec.StartupProbe, nil) {
			p.killContainer(c, "startup probe failed")
			return
		}
	}
	if spec.LivenessProbe != nil {
		go func() {
			if !p.runProbe(ctx, spec, pid, env, spec.LivenessProbe, nil) && ctx.Err() == nil {
				p.killContainer(c, "liveness probe failed")
			}
		}()
	}
	if spec.ReadinessProbe == nil {
		p.setReady(c, true)
		// Returning would cancel ctx, and with it the liveness probe.
		<-ctx.Done()
		return
	}
	p.runProbe(ctx, spec, pid, env, spec.ReadinessProbe, func(ok bool) { p.setReady(c, ok) })
}

func (p *podRuntime) setReady(c *containerState, ready bool) {
	p.mu.Lock()
	changed := c.ready != ready && !c.exited
	if changed {
		c.ready = ready
	}
	p.mu.Unlock()
	if changed {
		p.changed()
	}
}

func (p *podRuntime) killContainer(c *containerState, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.proc != nil && !c.exited {
		c.message = why
		_ = c.proc.Signal(syscall.SIGKILL)
	}
}

// runProbe runs pr until ctx ends. With onResult nil (startup, liveness) it
// returns false once failureThreshold consecutive failures happen, and for a
// startup probe true at the first success; with onResult (readiness) it
// reports every change of the thresholded result and only returns at the end.
func (p *podRuntime) runProbe(ctx context.Context, spec corev1.Container, pid int, env []string,
	pr *corev1.Probe, onResult func(bool),
) bool {
	period := secondsOr(pr.PeriodSeconds, 10)
	timeout := secondsOr(pr.TimeoutSeconds, 1)
	success := int(max(pr.SuccessThreshold, 1))
	failure := 3
	if pr.FailureThreshold > 0 {
		failure = int(pr.FailureThreshold)
	}
	isStartup := pr == spec.StartupProbe
	select {
	case <-ctx.Done():
		return true
	case <-time.After(time.Duration(pr.InitialDelaySeconds) * time.Second):
	}
	oks, fails := 0, 0
	for {
		ok := p.probeOnce(ctx, spec, pid, env, pr, timeout)
		if ctx.Err() != nil {
			return true
		}
		if ok {
			oks, fails = oks+1, 0
		} else {
			oks, fails = 0, fails+1
		}
		switch {
		case onResult != nil:
			if oks >= success {
				onResult(true)
			} else if fails >= failure {
				onResult(false)
			}
		case ok && isStartup:
			return true
		case fails >= failure:
			return false
		}
		select {
		case <-ctx.Done():
			return true
		case <-time.After(period):
		}
	}
}

func secondsOr(v int32, def int) time.Duration {
	if v <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(v) * time.Second
}

func (p *podRuntime) probeOnce(ctx context.Context, spec corev1.Container, pid int, env []string,
	pr *corev1.Probe, timeout time.Duration,
) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ip := p.podIP()
	switch {
	case pr.Exec != nil:
		if len(pr.Exec.Command) == 0 {
			return false
		}
		// Inside the container's namespaces (network, mounts, hostname).
		args := append([]string{"/usr/bin/nsenter", "--target", strconv.Itoa(pid), "--net", "--mount", "--uts", "--ipc", "--"}, pr.Exec.Command...)
		args = p.inCgroup(spec.Name, args)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		// On timeout the whole probe dies, not only nsenter's exec'd shell: a client it
		// started against a hung server would otherwise wait forever, one per period.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		return cmd.Run() == nil
	case pr.TCPSocket != nil:
		host := pr.TCPSocket.Host
		if host == "" {
			host = ip
		}
		port, err := resolvePort(pr.TCPSocket.Port, spec)
		if err != nil {
			return false
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		host := g.Host
		if host == "" {
			host = ip
		}
		port, err := resolvePort(g.Port, spec)
		if err != nil {
			return false
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := g.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path), nil)
		if err != nil {
			return false
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelets do not verify probe TLS either
		}}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	default:
		// gRPC probes are not supported.
		return false
	}
}

func resolvePort(port intstr.IntOrString, c corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("no container port named %q", port.StrVal)
}

// probeEnv is the container's environment for exec probes; an error leaves
// only PATH (the container started with the same environment, so it is rare).
func (p *podRuntime) probeEnv(c corev1.Container) []string {
	env, err := p.k.resolveEnv(p.podCopy(), &c, p.podIP())
	if err != nil {
		return []string{"PATH=" + defaultPath}
	}
	return env
}
