package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/gomomento/valkey-operator/tests/localcluster/kubelet"
)

// kubeletAuth makes the CA that secures the API server's calls to the kubelet API (`kubectl
// logs`, `exec`, `attach`), as in a real cluster: the kubelet's serving certificates are signed
// by it and the API server verifies them (--kubelet-certificate-authority), and the API server
// presents a client certificate it signed (--kubelet-client-certificate/-key), which the
// kubelet requires. Without it anything that reaches the bridge could exec into pods. The files
// go to dir; the returned flags are the API server's.
func kubeletAuth(dir string) (*kubelet.Authority, map[string]string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "local-cluster kubelet API CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("localcluster: kubelet API CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("localcluster: API server's kubelet client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{
		"kubelet-ca.crt":               pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"apiserver-kubelet-client.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"apiserver-kubelet-client.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, nil, err
		}
	}
	flags := map[string]string{
		"kubelet-certificate-authority": filepath.Join(dir, "kubelet-ca.crt"),
		"kubelet-client-certificate":    filepath.Join(dir, "apiserver-kubelet-client.crt"),
		"kubelet-client-key":            filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	return &kubelet.Authority{Cert: caCert, Key: caKey}, flags, nil
}
