package harness

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// DialFromPod opens a TCP connection to addr from inside the network namespace of pod ns/name,
// as a process of that pod would, and closes it: nil when the connection was accepted. A packet
// a NetworkPolicy enforcer drops is never answered, so a refused connection is a timeout.
func DialFromPod(ns, name, addr string, timeout time.Duration) error {
	path, err := Cluster.Kubelet.PodNetns(ns, name)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		// The thread enters the pod's namespace and is never unlocked: it ends with the
		// goroutine, so no other goroutine ever runs in that namespace.
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter %s: %w", path, err)
			return
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			_ = c.Close()
		}
		errc <- err
	}()
	return <-errc
}
