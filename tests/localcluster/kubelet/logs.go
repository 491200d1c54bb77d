package kubelet

import (
	"bytes"
	"context"
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

	corev1listers "k8s.io/client-go/listers/core/v1"
)

// followPollPeriod is how often a followed log file is checked for more.
const followPollPeriod = 200 * time.Millisecond

// serveKubeletAPI serves the part of the kubelet API that `kubectl logs`
// uses (/containerLogs) over HTTPS on the gateway when KubeletPortBase is
// set; it returns a function that stops the listener.
//
// virtual-kubelet's node/api package has these routes, but importing it
// would add k8s.io/apiserver, k8s.io/streaming and gorilla/mux to the module
// for the sake of exec/attach/port-forward, which this kubelet cannot offer
// (there is no container to attach to); the log route alone is short.
func (k *Kubelet) serveKubeletAPI(_ context.Context, ns *nodeState, _ corev1listers.PodLister) (func(), error) {
	port := k.kubeletPort(ns)
	if port == 0 {
		return func() {}, nil
	}
	cert, err := selfSignedCert(k.cfg.Network.Gateway, ns.spec.Name)
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(k.cfg.Network.Gateway, strconv.Itoa(port)),
		&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("kubelet API listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		k.serveLogs(w, r, ns.spec.Name)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(l) //nolint:errcheck // ends with Close
	return func() { _ = srv.Close() }, nil
}

// serveLogs writes a container's log file, honouring tailLines, limitBytes
// and follow (until the container exits or the client goes away).
// sinceSeconds, sinceTime and timestamps are ignored: the file has no
// timestamps.
func (k *Kubelet) serveLogs(w http.ResponseWriter, r *http.Request, node string) {
	nsName, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	p, err := k.pod(nsName, podName)
	if err != nil || p.node != node {
		http.Error(w, fmt.Sprintf("pod %s/%s not found on node %s", nsName, podName, node), http.StatusNotFound)
		return
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
		http.Error(w, fmt.Sprintf("container %s not found in pod %s/%s", container, nsName, podName), http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	follow := q.Get("follow") == "true"
	limit := int64(-1)
	if v, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && v > 0 {
		limit = v
	}
	tail := -1
	if v, err := strconv.Atoi(q.Get("tailLines")); err == nil && v >= 0 {
		tail = v
	}

	f, err := os.Open(p.logPath(container))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			w.Header().Set("Content-Type", "text/plain")
			return // not started yet: no output
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if tail >= 0 {
		data = lastLines(data, tail)
	}
	w.Header().Set("Content-Type", "text/plain")
	flusher, _ := w.(http.Flusher)
	write := func(b []byte) bool {
		if limit >= 0 {
			if int64(len(b)) > limit {
				b = b[:limit]
			}
			limit -= int64(len(b))
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return limit != 0
	}
	if !write(data) || !follow {
		return
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if !write(buf[:n]) {
				return
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-exitCh:
			// Drain what the process wrote before it exited.
			rest, _ := io.ReadAll(f)
			write(rest)
			return
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

func selfSignedCert(ip, name string) (tls.Certificate, error) {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
