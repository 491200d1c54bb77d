package kubelet

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// followPollPeriod is how often a followed log file is checked for more.
const followPollPeriod = 200 * time.Millisecond

// serveKubeletAPI serves the kubelet API routes that kubectl reaches through the API server,
// over HTTPS on the gateway when KubeletPortBase is set: /containerLogs (`kubectl logs`),
// /exec (`kubectl exec`) and /attach (`kubectl attach`, `kubectl run -i`), through
// virtual-kubelet's node/api handlers (which speak the SPDY and WebSocket stream protocols) with
// this package's hooks behind them (stream.go). It returns a function that stops the listener.
func (k *Kubelet) serveKubeletAPI(_ context.Context, ns *nodeState, _ corev1listers.PodLister) (func(), error) {
	port := k.kubeletPort(ns)
	if port == 0 {
		return func() {}, nil
	}
	cert, err := servingCert(k.cfg.Network.Gateway, ns.spec.Name, k.cfg.APIAuthority)
	if err != nil {
		return nil, err
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if a := k.cfg.APIAuthority; a != nil {
		// Only the API server (its kubelet client certificate) may stream logs or exec.
		pool := x509.NewCertPool()
		pool.AddCert(a.Cert)
		tlsCfg.ClientCAs, tlsCfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(k.cfg.Network.Gateway, strconv.Itoa(port)), tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet API listener: %w", err)
	}
	node := ns.spec.Name
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/", api.PodHandler(api.PodHandlerConfig{
		RunInContainer:    k.runInContainer(node),
		AttachToContainer: k.attachToContainer(node),
		GetContainerLogs:  k.containerLogs(node),
		StreamIdleTimeout: streamIdleTimeout,
	}, false))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(l) //nolint:errcheck // ends with Close
	return func() { _ = srv.Close() }, nil
}

// logOptions are the parts of a log request that the log file supports: tail lines (-1: all),
// a byte limit (-1: none) and follow (until the container exits or the client goes away).
// sinceSeconds, sinceTime and timestamps are ignored: the file has no timestamps.
type logOptions struct {
	tail   int
	limit  int64
	follow bool
}

// containerLogs is virtual-kubelet's GetContainerLogs hook: the container's log file, streamed
// through a pipe so that a followed log reaches the client as it grows.
func (k *Kubelet) containerLogs(node string) api.ContainerLogsHandlerFunc {
	return func(ctx context.Context, namespace, podName, container string, o api.ContainerLogOpts) (io.ReadCloser, error) {
		p, err := k.pod(namespace, podName)
		if err != nil || p.node != node {
			return nil, errdefs.NotFoundf("pod %s/%s not found on node %s", namespace, podName, node)
		}
		var exitCh chan struct{}
		p.mu.Lock()
		for _, c := range p.containers {
			if c.spec.Name == container {
				exitCh = c.exitCh
			}
		}
		p.mu.Unlock()
		if exitCh == nil {
			return nil, errdefs.NotFoundf("container %s not found in pod %s/%s", container, namespace, podName)
		}
		opts := logOptions{tail: -1, limit: -1, follow: o.Follow}
		// virtual-kubelet parses an absent tailLines and tailLines=0 alike as Tail 0; 0 is
		// taken as "every line", which is what kubectl asks for far more often.
		if o.Tail > 0 {
			opts.tail = o.Tail
		}
		if o.LimitBytes > 0 {
			opts.limit = int64(o.LimitBytes)
		}
		r, w := io.Pipe()
		go func() {
			_ = w.CloseWithError(k.writeLogs(ctx, w, p, container, exitCh, opts))
		}()
		return r, nil
	}
}

// writeLogs writes a container's log file to w, honouring opts; with follow, until the
// container exits (exitCh) or ctx ends.
func (k *Kubelet) writeLogs(ctx context.Context, w io.Writer, p *podRuntime, container string, exitCh chan struct{}, opts logOptions) error {
	f, err := os.Open(p.logPath(container))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // not started yet: no output
		}
		return err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if opts.tail >= 0 {
		data = lastLines(data, opts.tail)
	}
	limit := opts.limit
	write := func(b []byte) (bool, error) {
		if limit >= 0 {
			if int64(len(b)) > limit {
				b = b[:limit]
			}
			limit -= int64(len(b))
		}
		if _, err := w.Write(b); err != nil {
			return false, err
		}
		return limit != 0, nil
	}
	if more, err := write(data); !more || err != nil || !opts.follow {
		return err
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if more, err := write(buf[:n]); !more || err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-exitCh:
			// Drain what the process wrote before it exited.
			rest, _ := io.ReadAll(f)
			_, err := write(rest)
			return err
		case <-time.After(followPollPeriod):
		}
	}
}

func lastLines(data []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(data[:end], '\n')
		if j < 0 {
			return data
		}
		end = j
	}
	return data[end+1:]
}

// servingCert is the kubelet API's certificate for the node: for its address and name, signed
// by ca, or self-signed without one.
func servingCert(ip, name string, ca *Authority) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kubelet " + strings.TrimSpace(name)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		DNSNames:     []string{name},
	}
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
