package kubelet_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// stream is one exec or attach session through the API server, over the protocol kubectl uses
// first (WebSocket) or its fallback (SPDY).
func stream(t *testing.T, ns, pod, sub string, opts *corev1.PodExecOptions, spdy bool, stdin string) (stdout, stderr string, err error) {
	t.Helper()
	var params = scheme.ParameterCodec
	req := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource(sub)
	if sub == "attach" {
		req = req.VersionedParams(&corev1.PodAttachOptions{
			Container: opts.Container, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, TTY: opts.TTY,
		}, params)
	} else {
		req = req.VersionedParams(opts, params)
	}
	var ex remotecommand.Executor
	if spdy {
		ex, err = remotecommand.NewSPDYExecutor(restConfig, "POST", req.URL())
	} else {
		ex, err = remotecommand.NewWebSocketExecutor(restConfig, "GET", req.URL().String())
	}
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	so := remotecommand.StreamOptions{Tty: opts.TTY}
	if opts.Stdin {
		so.Stdin = strings.NewReader(stdin)
	}
	if opts.Stdout {
		so.Stdout = &out
	}
	if opts.Stderr {
		so.Stderr = &errb
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, so)
	return out.String(), errb.String(), err
}

// TestExec: `kubectl exec` reaches a command run inside the container's namespaces, with its
// stdout, stderr, stdin, exit code and, when asked, a terminal; over WebSocket and SPDY.
func TestExec(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever, Hostname: "sleepy",
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "600"},
				Env: []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}}}},
	})
	waitPod(t, ns, "sleeper", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	for _, spdy := range []bool{false, true} {
		name := map[bool]string{false: "websocket", true: "spdy"}[spdy]
		t.Run(name, func(t *testing.T) {
			out, errOut, err := stream(t, ns, "sleeper", "exec", &corev1.PodExecOptions{Container: "c", Stdout: true, Stderr: true,
				Command: []string{"sh", "-c", "echo $GREETING; hostname; echo oops >&2; exit 3"}}, spdy, "")
			var code utilexec.ExitError
			if !errors.As(err, &code) || code.ExitStatus() != 3 {
				t.Errorf("exit: %v, want exit code 3", err)
			}
			if out != "hello\nsleepy\n" || errOut != "oops\n" {
				t.Errorf("stdout %q stderr %q, want the container's env and hostname, and oops on stderr", out, errOut)
			}
			out, _, err = stream(t, ns, "sleeper", "exec", &corev1.PodExecOptions{Container: "c", Stdin: true, Stdout: true, Stderr: true,
				Command: []string{"tr", "a-z", "A-Z"}}, spdy, "piped in\n")
			if err != nil || out != "PIPED IN\n" {
				t.Errorf("stdin through exec: %q, %v", out, err)
			}
			out, _, err = stream(t, ns, "sleeper", "exec", &corev1.PodExecOptions{Container: "c", Stdin: true, Stdout: true, TTY: true,
				Command: []string{"sh", "-c", "test -t 0 && test -t 1 && echo on-a-terminal"}}, spdy, "")
			if err != nil || !strings.Contains(out, "on-a-terminal") {
				t.Errorf("exec with a tty: %q, %v", out, err)
			}
		})
	}
}

// TestAttach: a container with stdin (`kubectl run -i`) reads what an attached client sends and
// its output reaches that client; stdinOnce ends its stdin with the client's. With a tty
// (`kubectl run -it`) the container runs on a terminal. Both outputs are also in the log.
func TestAttach(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: corev1.PodSpec{NodeName: "kt-b", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Stdin: true, StdinOnce: true,
				Command: []string{"sh", "-c", "while read l; do echo got:$l; echo warn:$l >&2; done; echo bye"}}}},
	})
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "terminal"},
		Spec: corev1.PodSpec{NodeName: "kt-c", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Stdin: true, StdinOnce: true, TTY: true,
				Command: []string{"sh", "-c", "test -t 0 && echo on-a-terminal; read l; echo got:$l"}}}},
	})
	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }
	waitPod(t, ns, "reader", 20*time.Second, "Running", running)
	waitPod(t, ns, "terminal", 20*time.Second, "Running", running)

	out, errOut, err := stream(t, ns, "reader", "attach", &corev1.PodExecOptions{Container: "c", Stdin: true, Stdout: true, Stderr: true}, false, "a\nb\n")
	if err != nil || out != "got:a\ngot:b\nbye\n" || errOut != "warn:a\nwarn:b\n" {
		t.Errorf("attach with stdin: stdout %q stderr %q, %v", out, errOut, err)
	}
	succeeded := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded }
	waitPod(t, ns, "reader", 20*time.Second, "Succeeded once its stdin ended", succeeded)
	logs, err := client.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil || !strings.Contains(string(logs), "got:a") || !strings.Contains(string(logs), "bye") {
		t.Errorf("logs of the attached container: %q, %v", logs, err)
	}

	// What the terminal printed before the client attached is in the log only, as on a real
	// kubelet; what it prints afterwards reaches the client.
	out, _, err = stream(t, ns, "terminal", "attach", &corev1.PodExecOptions{Container: "c", Stdin: true, Stdout: true, TTY: true}, false, "typed\n")
	if err != nil || !strings.Contains(out, "got:typed") {
		t.Errorf("attach with a tty: %q, %v", out, err)
	}
	waitPod(t, ns, "terminal", 20*time.Second, "Succeeded", succeeded)
	logs, _ = client.CoreV1().Pods(ns).GetLogs("terminal", &corev1.PodLogOptions{}).DoRaw(context.Background())
	if !strings.Contains(string(logs), "on-a-terminal") {
		t.Errorf("the tty container did not run on a terminal; its log: %q", logs)
	}
}

// TestImageEntrypoint: a container of the valkey/valkey image that sets only args (what
// `kubectl run --image valkey/valkey:8.0 -- valkey-cli ...` creates) runs them as the image's
// entrypoint would: a command of the image when the first arg is one.
func TestImageEntrypoint(t *testing.T) {
	requireSetup(t)
	ns := newNamespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cli"},
		Spec: corev1.PodSpec{NodeName: "kt-a", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "valkey/valkey:8.0", Args: []string{"valkey-cli", "--version"}}}},
	})
	waitPod(t, ns, "cli", 20*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs, err := client.CoreV1().Pods(ns).GetLogs("cli", &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil || !strings.HasPrefix(string(logs), "valkey-cli ") {
		t.Errorf("valkey-cli --version through the image's entrypoint printed %q, %v", logs, err)
	}
}
