// Command netpol is the local cluster's NetworkPolicy enforcer: sigs.k8s.io/kube-network-policies
// (a Kubernetes SIG project: nftables rules send the first packet of each connection to or from a
// pod that a policy selects to an nfqueue, and a verdict is given in user space from the
// policies, pods and namespaces it watches), run as one process per local node. Only this main
// is ours, because the project's own cmd/main.go reads in-cluster configuration and names its
// nftables table once per machine, where the local clusters side by side (slots vko0-vko7) each
// need their own table and queue. Built by hack/build-netpol.sh into the set-up cache.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to watch")
	node := flag.String("node", "", "the Kubernetes Node whose pods this process guards")
	table := flag.String("table", "", "the nftables table (inet family) this process owns; deleted on exit")
	queue := flag.Int("queue", 100, "the nfqueue number the table sends packets to")
	cleanup := flag.Bool("cleanup", false, "delete every inet table whose name starts with -table (those a killed run left behind) and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *table == "" {
		fmt.Fprintln(os.Stderr, "netpol: -table is required")
		os.Exit(2)
	}
	if *cleanup {
		if err := deleteTables(*table); err != nil {
			fmt.Fprintln(os.Stderr, "netpol:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*kubeconfig, *node, *table, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "netpol:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, node, table string, queue int) error {
	if node == "" {
		return fmt.Errorf("-node is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// SIGTERM too (the project's main handles SIGINT only): the local cluster stops its
	// processes with SIGTERM, and the table must go with the process.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := networkpolicy.NewController(cs,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:     queue,
			NodeName:    node,
			NFTableName: table,
			// Kernels from 6.12 on have the conntrack fix the workaround is for.
			NetfilterBug1766Fix: false,
			// NRI stays enabled: the controller looks up IPs no pod holds through its NRI
			// plugin, which must exist (it finds no runtime socket here and answers nothing).
		})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	factory.Start(ctx.Done())
	select {
	case <-ctx.Done():
		<-errc // Run deletes the table as it returns
		return nil
	case err := <-errc:
		return err
	}
}

// deleteTables deletes every inet table whose name starts with prefix. A table left by a killed
// enforcer still sends packets to a queue nobody reads, and the kernel drops them: the pods of
// the next run on the slot could not talk.
func deleteTables(prefix string) error {
	nft, err := nftables.New()
	if err != nil {
		return err
	}
	tables, err := nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if strings.HasPrefix(t.Name, prefix) {
			nft.DelTable(t)
		}
	}
	return nft.Flush()
}
