package startup

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/settings"
)

// TLSFiles are the PEM files a listener serves TLS with. The files are
// read again when they change (compared by modification time and size at
// every handshake), so renewed certificates are served without a restart;
// a change that does not load (a certificate written before its key) keeps
// the last good ones until it does.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on client certificates (mTLS): a
	// certificate signed by one of its CAs is asked for and verified.
	ClientCAFile string
}

// Bind binds -tls-cert, -tls-key and -tls-client-ca.
func (f *TLSFiles) Bind(s *settings.Set) {
	s.String(&f.CertFile, "tls-cert", "SLUICE_TLS_CERT_FILE", "PEM file of the server certificate (and its chain); with -tls-key turns TLS on")
	s.String(&f.KeyFile, "tls-key", "SLUICE_TLS_KEY_FILE", "PEM file of the server certificate's private key")
	s.String(&f.ClientCAFile, "tls-client-ca", "SLUICE_TLS_CLIENT_CA_FILE", "PEM file of the CAs of client certificates; turns on mTLS")
}

// Enabled says whether TLS is configured.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

// Check refuses half a configuration, after parsing.
func (f TLSFiles) Check() error {
	switch {
	case (f.CertFile == "") != (f.KeyFile == ""):
		return settings.Usagef("TLS needs both -tls-cert and -tls-key")
	case f.ClientCAFile != "" && f.CertFile == "":
		return settings.Usagef("-tls-client-ca needs -tls-cert and -tls-key")
	}
	return nil
}

// ClientAuth says how a listener treats client certificates under mTLS.
type ClientAuth int

const (
	// RequireClientCert refuses a handshake without a verified client
	// certificate.
	RequireClientCert ClientAuth = iota
	// VerifyClientCertIfGiven verifies a certificate the client sends and
	// accepts a handshake without one: the handler decides (the decision
	// service's probes answer without one, its API does not).
	VerifyClientCertIfGiven
)

// ServerConfig returns a TLS configuration of the files, or an error when
// they do not load now. Without ClientCAFile, auth is ignored.
func (f TLSFiles) ServerConfig(auth ClientAuth, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &certReloader{files: f, log: log}
	if _, err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.certificate}
	if f.ClientCAFile != "" {
		// The CAs are looked up at every handshake, in the callback: a
		// ClientCAs pool would be fixed for the listener's life.
		cfg.ClientAuth = tls.RequireAnyClientCert
		if auth == VerifyClientCertIfGiven {
			cfg.ClientAuth = tls.RequestClientCert
		}
		cfg.VerifyPeerCertificate = r.verifyClient
	}
	return cfg, nil
}

// certReloader holds the files' last good contents.
type certReloader struct {
	files  TLSFiles
	log    *slog.Logger
	mu     sync.Mutex
	stamp  string // modification times and sizes of the files loaded
	failed string // the stamp that last failed to load, logged once
	cert   *tls.Certificate
	cas    *x509.CertPool
}

type loaded struct {
	cert *tls.Certificate
	cas  *x509.CertPool
}

// stampOf identifies the files' versions without reading them.
func (r *certReloader) stampOf() string {
	var s string
	for _, name := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			s += "?;"
			continue
		}
		s += fmt.Sprintf("%d:%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return s
}

// load returns the current certificate and CAs, reading the files again
// when they changed.
func (r *certReloader) load() (loaded, error) {
	stamp := r.stampOf()
	r.mu.Lock()
	defer r.mu.Unlock()
	if stamp == r.stamp || stamp == r.failed {
		if r.cert == nil {
			return loaded{}, errors.New("tls: no certificate loaded")
		}
		return loaded{r.cert, r.cas}, nil
	}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	var cas *x509.CertPool
	if err == nil && r.files.ClientCAFile != "" {
		var pem []byte
		if pem, err = os.ReadFile(r.files.ClientCAFile); err == nil {
			cas = x509.NewCertPool()
			if !cas.AppendCertsFromPEM(pem) {
				err = fmt.Errorf("no PEM certificate in %s", r.files.ClientCAFile)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("tls: load certificates: %w", err)
		if r.cert == nil {
			return loaded{}, err
		}
		r.failed = stamp
		r.log.Warn("tls certificates changed but do not load; serving the last ones", "err", err)
		return loaded{r.cert, r.cas}, nil
	}
	if r.cert != nil {
		r.log.Info("tls certificates reloaded", "cert", r.files.CertFile)
	}
	r.cert, r.cas, r.stamp, r.failed = &cert, cas, stamp, ""
	return loaded{r.cert, r.cas}, nil
}

func (r *certReloader) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l, err := r.load()
	return l.cert, err
}

// verifyClient verifies the client's chain against the current CAs; no
// certificate passes only where the listener asked without requiring one.
func (r *certReloader) verifyClient(raw [][]byte, _ [][]*x509.Certificate) error {
	if len(raw) == 0 {
		return nil
	}
	l, err := r.load()
	if err != nil {
		return err
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		if certs[i], err = x509.ParseCertificate(b); err != nil {
			return fmt.Errorf("tls: client certificate: %w", err)
		}
	}
	opts := x509.VerifyOptions{
		Roots: l.cas, Intermediates: x509.NewCertPool(), CurrentTime: time.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: client certificate: %w", err)
	}
	return nil
}
