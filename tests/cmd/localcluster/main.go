// Command localcluster starts the local Kubernetes of package localcluster and keeps it running
// until interrupted (Ctrl-C or SIGTERM), then tears everything down. It is the README's demo.
//
//	localcluster up     the cluster alone: prints the kubeconfig path
//	localcluster demo   the cluster, the operator and a sample ValkeyCluster
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gomomento/valkey-operator/tests/localcluster"
)

func main() {
	ctrllog.SetLogger(logr.Discard()) // envtest's own chatter; the operator's log is in a file
	mode := "up"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode != "up" && mode != "demo" {
		fmt.Fprintf(os.Stderr, "usage: %s [up|demo]\n", filepath.Base(os.Args[0]))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, mode); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, mode string) error {
	dir := os.Getenv("LOCALCLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "valkey-operator-demo")
	}
	// One demo per directory: a second one would wipe the first's kubeconfig, etcd data and
	// logs below. The lock is a sibling file (the directory itself is removed), released when
	// this process exits however it exits.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another demo (or localcluster up) is running in %s: stop it first, or set LOCALCLUSTER_DIR to another directory", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "starting the local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet)...")
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, OnBusy: func() {
		fmt.Fprintf(os.Stderr, "all %d local-cluster slots are in use (tests or other demos on this machine); waiting for one...\n", localcluster.Slots)
	}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping the local cluster...")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster: stop:", err)
		}
	}()
	fmt.Printf("local cluster is up; its kubeconfig is:\n  %s\n", c.Kubeconfig)
	fmt.Printf("its cluster DNS (%s, as pods see it) answers on %s\n\n", localcluster.ClusterDomain, c.DNSAddr())
	fmt.Printf("try:\n  export KUBECONFIG=%s PATH=%s:$PATH\n  kubectl get nodes -L topology.kubernetes.io/zone\n\n", c.Kubeconfig, localcluster.DefaultBinDir())
	if mode == "demo" {
		if err := demo(ctx, c); err != nil {
			return err
		}
	}
	fmt.Println("press Ctrl-C to stop and tear everything down")
	<-ctx.Done()
	return nil
}
