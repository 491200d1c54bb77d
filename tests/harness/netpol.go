package harness

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"
)

// DialFromPod opens a TCP connection to addr from inside the network namespace of pod ns/name,
// as a process of that pod would, and closes it: nil when the connection was accepted. A packet
// a NetworkPolicy enforcer drops is never answered, so a refused connection is a timeout.
//
// The connection is made by a child process (nsenter and bash's /dev/tcp), not by a thread of
// this one that enters the namespace: the local kubelet runs in this process and starts pods with
// a parent-death signal, which the kernel sends when the thread that started them ends, and a
// thread that entered another namespace must end rather than go back to the Go scheduler.
func DialFromPod(ns, name, addr string, timeout time.Duration) error {
	path, err := Cluster.Kubelet.PodNetns(ns, name)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+path, "--", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("connect to %s from %s/%s: no answer within %s", addr, ns, name, timeout)
	}
	if err != nil {
		return fmt.Errorf("connect to %s from %s/%s: %w: %s", addr, ns, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
