package kubelet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// NetworkConfig describes the one flat pod network: a Linux bridge on the host
// that holds the gateway address, and the range pod IPs are taken from.
type NetworkConfig struct {
	// Bridge is the bridge's interface name, at most 9 characters (veth names
	// are derived from it and Linux caps interface names at 15).
	Bridge string
	// CIDR is the pod range, e.g. 10.244.0.0/16; it must not be used
	// elsewhere on this machine.
	CIDR string
	// Gateway is the bridge's address inside CIDR, e.g. 10.244.0.1. Pods get
	// a default route through it, and the API server can listen on it so that
	// pods reach it with in-cluster configuration.
	Gateway string
}

// DefaultNetwork is the network the local cluster uses unless told otherwise.
var DefaultNetwork = NetworkConfig{Bridge: "vko0", CIDR: "10.244.0.0/16", Gateway: "10.244.0.1"}

func (c NetworkConfig) validate() (*net.IPNet, net.IP, error) {
	if c.Bridge == "" || len(c.Bridge) > 9 {
		return nil, nil, fmt.Errorf("bridge name %q must have 1 to 9 characters", c.Bridge)
	}
	_, ipnet, err := net.ParseCIDR(c.CIDR)
	if err != nil {
		return nil, nil, fmt.Errorf("parse pod cidr: %w", err)
	}
	if ipnet.IP.To4() == nil {
		return nil, nil, fmt.Errorf("pod cidr %s: only IPv4 is supported", c.CIDR)
	}
	gw := net.ParseIP(c.Gateway).To4()
	if gw == nil || !ipnet.Contains(gw) {
		return nil, nil, fmt.Errorf("gateway %q is not an IPv4 address inside %s", c.Gateway, c.CIDR)
	}
	return ipnet, gw, nil
}

// netnsPrefix names every network namespace this package makes for one bridge,
// so that TeardownNetwork (and a later run after a crash) can find them.
func (c NetworkConfig) netnsPrefix() string { return c.Bridge + "-pod" }

func (c NetworkConfig) netnsName(slot int) string { return fmt.Sprintf("%s%d", c.netnsPrefix(), slot) }

func (c NetworkConfig) hostVeth(slot int) string { return fmt.Sprintf("%sp%d", c.Bridge, slot) }

// SetupNetwork creates the bridge with the gateway address, idempotently, so
// the API server can bind the gateway before any pod exists. It needs root.
func SetupNetwork(cfg NetworkConfig) error {
	ipnet, gw, err := cfg.validate()
	if err != nil {
		return err
	}
	ones, _ := ipnet.Mask.Size()
	if _, err := net.InterfaceByName(cfg.Bridge); err != nil {
		if err := run("ip", "link", "add", cfg.Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge (needs root and the bridge module): %w", err)
		}
	}
	addr := fmt.Sprintf("%s/%d", gw, ones)
	out, err := output("ip", "-o", "-4", "addr", "show", "dev", cfg.Bridge)
	if err != nil {
		return err
	}
	if !strings.Contains(out, " "+addr+" ") {
		if err := run("ip", "addr", "add", addr, "dev", cfg.Bridge); err != nil {
			return fmt.Errorf("set gateway address: %w", err)
		}
	}
	if err := run("ip", "link", "set", cfg.Bridge, "up"); err != nil {
		return err
	}
	// Bridged traffic must not be judged by the host's iptables FORWARD
	// policy (Docker-style hosts set it to DROP) when br_netfilter is loaded.
	_ = os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("0"), 0o644)
	return nil
}

// TeardownNetwork deletes every pod network namespace and veth made for this
// bridge, then the bridge itself. Missing pieces are not an error.
func TeardownNetwork(cfg NetworkConfig) error {
	if _, _, err := cfg.validate(); err != nil {
		return err
	}
	var errs []error
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), cfg.netnsPrefix()) {
			if err := run("ip", "netns", "delete", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, cfg.Bridge+"p") {
			_ = run("ip", "link", "delete", i.Name)
		}
	}
	if _, err := net.InterfaceByName(cfg.Bridge); err == nil {
		if err := run("ip", "link", "delete", cfg.Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ipam hands out pod IPs. A slot is the offset of the IP in the range; it also
// names the pod's netns and host veth, so a stale namespace left by a crashed
// run is found and replaced when its slot is reused.
type ipam struct {
	mu    sync.Mutex
	cfg   NetworkConfig
	base  uint32
	size  uint32
	gw    uint32
	used  map[int]bool
	next  int
	ones  int
	gwStr string
}

func newIPAM(cfg NetworkConfig) (*ipam, error) {
	ipnet, gw, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ones, bits := ipnet.Mask.Size()
	return &ipam{
		cfg: cfg, base: binary.BigEndian.Uint32(ipnet.IP.To4()), size: 1 << (bits - ones),
		gw: binary.BigEndian.Uint32(gw), used: map[int]bool{}, next: 1, ones: ones, gwStr: gw.String(),
	}, nil
}

func (a *ipam) ip(slot int) string {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, a.base+uint32(slot))
	return net.IP(b).String()
}

func (a *ipam) allocate() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.size {
		slot := a.next
		a.next++
		if a.next >= int(a.size)-1 {
			a.next = 1
		}
		if slot <= 0 || slot >= int(a.size)-1 || a.base+uint32(slot) == a.gw || a.used[slot] {
			continue
		}
		a.used[slot] = true
		return slot, nil
	}
	return 0, fmt.Errorf("pod range %s is exhausted", a.cfg.CIDR)
}

func (a *ipam) release(slot int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, slot)
}

// createSandbox makes the pod's network namespace: a veth pair with the host
// end on the bridge, the pod end as eth0 with the slot's IP, loopback up and
// a default route through the gateway.
func (a *ipam) createSandbox(slot int) error {
	ns, host := a.cfg.netnsName(slot), a.cfg.hostVeth(slot)
	a.deleteSandbox(slot) // a leftover from a crashed run
	peer := fmt.Sprintf("%sc%d", a.cfg.Bridge, slot)
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", ns},
		{"ip", "link", "set", host, "master", a.cfg.Bridge},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", ns, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", ns, "addr", "add", fmt.Sprintf("%s/%d", a.ip(slot), a.ones), "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", a.gwStr},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			a.deleteSandbox(slot)
			return err
		}
	}
	return nil
}

func (a *ipam) deleteSandbox(slot int) {
	ns := a.cfg.netnsName(slot)
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		_ = run("ip", "netns", "delete", ns)
	}
	if _, err := net.InterfaceByName(a.cfg.hostVeth(slot)); err == nil {
		_ = run("ip", "link", "delete", a.cfg.hostVeth(slot))
	}
}

func (a *ipam) setLink(slot int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run("ip", "link", "set", a.cfg.hostVeth(slot), state)
}

func run(args ...string) error {
	_, err := output(args...)
	return err
}

func output(args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// BridgeNetfilter turns the bridge's own nf_call_iptables option on or off: on, the IPv4
// traffic it bridges between pods passes the host's inet netfilter hooks, where a NetworkPolicy
// enforcer judges it. The kernel ORs the option with the machine-wide bridge-nf-call-iptables
// sysctl (off: SetupNetwork), so one slot's choice leaves the other slots' bridges as they are.
func BridgeNetfilter(cfg NetworkConfig, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	if err := run("ip", "link", "set", cfg.Bridge, "type", "bridge", "nf_call_iptables", v); err != nil {
		return fmt.Errorf("bridge %s nf_call_iptables %s (needs br_netfilter): %w", cfg.Bridge, v, err)
	}
	return nil
}
