package decision

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/startup"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of a leaf for 127.0.0.1.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"sluice-decide"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Both ports over real TLS with client certificates (mTLS): a caller with
// a certificate of the CA is answered, one without is refused (the probes
// still answer it), and a renewed server certificate is served without a
// restart.
func TestTLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "sluice test CA")
	files := startup.TLSFiles{
		CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
		ClientCAFile: filepath.Join(dir, "ca.pem"),
	}
	cert, key := ca.issue(t, "decide-1", x509.ExtKeyUsageServerAuth)
	writeFile(t, files.CertFile, cert)
	writeFile(t, files.KeyFile, key)
	writeFile(t, files.ClientCAFile, ca.pem)
	st := newStack(t, ServerConfig{TLS: files}, gatewayBuckets, gatewayMappings)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	ccert, ckey := ca.issue(t, "envoy", x509.ExtKeyUsageClientAuth)
	clientCert, err := tls.X509KeyPair(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}
	withoutCert := &tls.Config{RootCAs: roots}
	httpsClient := func(cfg *tls.Config) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	acquire := func(c *http.Client) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "https://"+st.srv.HTTPAddr()+"/v1/acquire", strings.NewReader(`{"bucket": "search"}`))
		req.Header.Set("Authorization", "Bearer "+st.edge)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("https acquire: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := acquire(httpsClient(withCert)); code != 200 || !strings.Contains(body, `"remaining":2`) {
		t.Fatalf("https with a client certificate: %d %s", code, body)
	}
	if code, body := acquire(httpsClient(withoutCert)); code != http.StatusUnauthorized {
		t.Fatalf("https without a client certificate: %d %s, want 401", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := httpsClient(withoutCert).Get("https://" + st.srv.HTTPAddr() + path)
		if err != nil {
			t.Fatalf("%s without a client certificate: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s without a client certificate: %d", path, resp.StatusCode)
		}
	}
	// A client certificate of another CA fails the handshake.
	stranger := newTestCA(t, "another CA")
	scert, skey := stranger.issue(t, "intruder", x509.ExtKeyUsageClientAuth)
	strangerCert, _ := tls.X509KeyPair(scert, skey)
	if _, err := httpsClient(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{strangerCert}}).Get(
		"https://" + st.srv.HTTPAddr() + "/healthz"); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}

	// gRPC: with a certificate answered, without one refused.
	ask := func(cfg *tls.Config) (*rlsv3.RateLimitResponse, error) {
		conn, err := grpc.NewClient(st.srv.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+st.edge)
		return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, request("edge", 0, desc("generic_key", "search")))
	}
	if resp, err := ask(withCert); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK ||
		resp.GetStatuses()[0].GetLimitRemaining() != 1 {
		t.Fatalf("gRPC with a client certificate: %v %v", resp, err)
	}
	if _, err := ask(withoutCert); status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC without a client certificate: %v, want Unavailable (refused handshake)", err)
	}

	// Renewal: new files, then new connections get the new certificate.
	cert2, key2 := ca.issue(t, "decide-2-renewed", x509.ExtKeyUsageServerAuth)
	writeFile(t, files.KeyFile+".new", key2)
	writeFile(t, files.CertFile+".new", cert2)
	for _, f := range []string{files.KeyFile, files.CertFile} {
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range []string{st.srv.HTTPAddr(), st.srv.GRPCAddr()} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert},
			NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("handshake after renewal on %s: %v", addr, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		conn.Close()
		if got != "decide-2-renewed" {
			t.Fatalf("%s serves %q after renewal, want the renewed certificate", addr, got)
		}
	}
}
