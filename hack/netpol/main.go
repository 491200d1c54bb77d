// Command netpol is the local cluster's NetworkPolicy enforcer: sigs.k8s.io/kube-network-policies
// (a Kubernetes SIG project), run as one process per local node. Its design: nftables rules send
// the first packet of each connection to or from a pod that a policy selects to an nfqueue, and
// its controller gives the verdict in user space from the policies, pods and namespaces it
// watches (later packets pass by conntrack). Built by hack/build-netpol.sh into the set-up cache.
//
// Two parts are ours, and why:
//
//   - This main: the project's own cmd/main.go reads in-cluster configuration and names one
//     nftables table per machine, where the local clusters side by side (slots vko0-vko7) need
//     one table and one queue per node and slot.
//   - The rules that send packets to the queue (syncRules). The project's own rules use the
//     nftables `queue` expression, which needs a kernel built with CONFIG_NFT_QUEUE; the kernel
//     of these machines is not ("netlink receive: no such file or directory" for every rule with
//     it, so its whole table is refused). The same kernel has the xtables NFQUEUE target and
//     nft_compat, which queue the same packets to the same queue. So this main installs the
//     project's rules, as its controller.go writes them, with that target in place of the
//     expression, in a table of its own; the controller's own attempt (in a table named
//     <table>-upstream) keeps failing harmlessly. The verdicts, the part that reads the
//     policies, are the project's code unchanged.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
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
	pods, policies := factory.Core().V1().Pods(), factory.Networking().V1().NetworkPolicies()
	c, err := networkpolicy.NewController(cs, policies, factory.Core().V1().Namespaces(), pods,
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:     queue,
			NodeName:    node,
			NFTableName: table + "-upstream",
			// Kernels from 6.12 on have the conntrack fix the workaround is for.
			NetfilterBug1766Fix: false,
			// NRI stays enabled: the controller looks up IPs no pod holds through its NRI
			// plugin, which must exist (it finds no runtime socket here and answers nothing).
		})
	if err != nil {
		return err
	}
	r := &rules{node: node, table: table, queue: uint16(queue), pods: pods.Lister(), policies: policies.Lister(), kick: make(chan struct{}, 1)}
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.changed() },
		UpdateFunc: func(any, any) { r.changed() },
		DeleteFunc: func(any) { r.changed() },
	}
	if _, err := pods.Informer().AddEventHandler(kick); err != nil {
		return err
	}
	if _, err := policies.Informer().AddEventHandler(kick); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go r.loop(ctx)
	select {
	case <-ctx.Done():
		<-errc // Run stops reading the queue as it returns
	case err = <-errc:
	}
	if derr := deleteTables(table); derr != nil && err == nil {
		err = derr
	}
	// The upstream table, should a kernel ever accept it.
	_ = deleteTables(table + "-upstream")
	return err
}

// rules keeps the table that sends packets to the queue in step with the pods and policies.
type rules struct {
	node, table string
	queue       uint16
	pods        corelisters.PodLister
	policies    networkinglisters.NetworkPolicyLister
	kick        chan struct{}
}

func (r *rules) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loop writes the table at each change of a pod or a policy, and every 30 s besides.
func (r *rules) loop(ctx context.Context) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		if err := r.sync(); err != nil {
			klog.ErrorS(err, "writing the nftables rules", "table", r.table)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-tick.C:
		}
	}
}

// localSelected is the IPv4 addresses of the pods of this node that some NetworkPolicy selects
// (the project's getLocalPodsForNetworkPolicy, over every policy).
func (r *rules) localSelected() ([]netip.Addr, error) {
	pols, err := r.policies.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for _, p := range pols {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			continue
		}
		pods, err := r.pods.Pods(p.Namespace).List(sel)
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			if pod.Spec.NodeName != r.node || pod.Spec.HostNetwork {
				continue
			}
			for _, ip := range podIPs(pod) {
				if !seen[ip] {
					seen[ip] = true
					out = append(out, ip)
				}
			}
		}
	}
	return out, nil
}

func podIPs(pod *v1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

// sync writes the table, as one transaction: the rules of the project's syncNFTablesRules for
// IPv4 (root's own sockets on the node accepted, established connections accepted, the first
// packet of a connection to or from a selected local pod queued), with the xtables NFQUEUE
// target (revision 3, no bypass: no reader, no packet) in place of the queue expression.
func (r *rules) sync() error {
	ips, err := r.localSelected()
	if err != nil {
		return err
	}
	nft, err := nftables.New()
	if err != nil {
		return err
	}
	table := &nftables.Table{Name: r.table, Family: nftables.TableFamilyINet}
	nft.AddTable(table) // add, delete, add: the table is written whole
	nft.DelTable(table)
	nft.AddTable(table)
	set := &nftables.Set{Table: table, Name: "podips-v4", KeyType: nftables.TypeIPAddr}
	elems := make([]nftables.SetElement, len(ips))
	for i, ip := range ips {
		elems[i] = nftables.SetElement{Key: ip.AsSlice()}
	}
	if err := nft.AddSet(set, elems); err != nil {
		return err
	}
	chain := nft.AddChain(&nftables.Chain{
		Name: "postrouting", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource - 5),
	})
	add := func(exprs ...expr.Any) { nft.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs}) }
	// meta skuid 0 accept
	add(&expr.Meta{Key: expr.MetaKeySKUID, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept})
	// ct state established,related accept
	add(&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}}, &expr.Verdict{Kind: expr.VerdictAccept})
	// ip saddr @podips-v4 queue to N; ip daddr @podips-v4 queue to N
	for _, offset := range []uint32{12, 16} {
		add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
			r.nfqueue())
	}
	return nft.Flush()
}

// nfqueue is the xtables target NFQUEUE, revision 3 (struct xt_NFQ_info_v3: queuenum,
// queues_total, flags, in host byte order), sending to r.queue alone, without bypass.
func (r *rules) nfqueue() *expr.Target {
	info := make(xt.Unknown, 6)
	binary.NativeEndian.PutUint16(info[0:], r.queue)
	binary.NativeEndian.PutUint16(info[2:], 1)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
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
