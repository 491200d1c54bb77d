package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority made by a test, to sign the leaves of TLS clusters.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert encoded, as it goes into a Secret's ca.crt.
	PEM []byte
}

// NewCA makes a self-signed CA named name, valid from an hour ago (clock skew between the
// host and the nodes is not what a test means to exercise) for a year.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Roots is a pool that trusts ca alone, as a client of a TLS cluster should.
func (ca *CA) Roots() *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return roots
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n, nil
}

// LeafOptions shape a leaf certificate; the zero value is what the docs' security/tls.md asks
// for: the Service's name and the wildcard under it, server and client auth, 90 days.
type LeafOptions struct {
	DNSNames []string
	Usages   []x509.ExtKeyUsage
	NotAfter time.Time
}

// Leaf issues a certificate for the cluster whose Service is named service (ServiceHost),
// signed by ca, and returns tls.crt and tls.key as PEM.
func (ca *CA) Leaf(service string, o LeafOptions) (certPEM, keyPEM []byte, err error) {
	if o.DNSNames == nil {
		o.DNSNames = []string{service, "*." + service}
	}
	if o.Usages == nil {
		o.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(90 * 24 * time.Hour)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("leaf key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: service},
		DNSNames:     o.DNSNames,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  o.Usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("leaf certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("leaf key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// TLSSecretData is the data of a kubernetes.io/tls Secret: the leaf, its key, and ca.crt as
// the bundle of cas (two during a CA rotation).
func TLSSecretData(certPEM, keyPEM []byte, cas ...*CA) map[string][]byte {
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.PEM...)
	}
	return map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": bundle}
}

// ServedCert is the leaf the node at addr serves, verified against roots under name (its
// pod's DNS name, PodHost): what a rotation check compares with the Secret's tls.crt.
func ServedCert(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}
