package decision

import (
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/internal/testenv"
)

// startNginx runs a real nginx with testdata/nginx.conf.tmpl, stopped by
// PID when t ends, and returns its address.
func startNginx(t *testing.T, decide, upstream, token string) string {
	t.Helper()
	return startNginxWith(t, map[string]string{"Decide": decide, "Upstream": upstream, "Token": token, "Scheme": "http"})
}

// startNginxWith is startNginx with the template's variables: Decide,
// Upstream, Token, Scheme, and for TLS to the decision service CA, Cert and
// Key (nginx's client certificate).
func startNginxWith(t *testing.T, vars map[string]string) string {
	t.Helper()
	bin := testenv.LookPath(t, "nginx")
	dir := t.TempDir()
	listen := freeAddr(t)
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "nginx.conf.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	f, err := os.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	vars["Dir"], vars["Listen"] = dir, listen
	err = tmpl.Execute(f, vars)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	out, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			return listen
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not listen on %s: %s", listen, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nginx's auth_request asks the GET form of /v1/acquire before each
// request: the upstream sees exactly the bucket's capacity, and the client
// gets 429 with Retry-After from then on.
func TestNginxAuthRequest(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, gatewayBuckets, gatewayMappings)
	checkNginx(t, st, func(upstream string) string { return startNginx(t, st.srv.HTTPAddr(), upstream, st.edge) })
}

// The TLS and mTLS configuration of docs/gateways.md: nginx verifies the
// service's certificate and presents its own.
func TestNginxAuthRequestOverMTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "sluice test CA")
	files := startup.TLSFiles{
		CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
		ClientCAFile: filepath.Join(dir, "ca.pem"),
	}
	cert, key := ca.issue(t, "sluice-decide", x509.ExtKeyUsageServerAuth)
	writeFile(t, files.CertFile, cert)
	writeFile(t, files.KeyFile, key)
	writeFile(t, files.ClientCAFile, ca.pem)
	ncert, nkey := ca.issue(t, "nginx", x509.ExtKeyUsageClientAuth)
	writeFile(t, filepath.Join(dir, "nginx.pem"), ncert)
	writeFile(t, filepath.Join(dir, "nginx-key.pem"), nkey)
	st := newStack(t, ServerConfig{TLS: files}, gatewayBuckets, gatewayMappings)
	checkNginx(t, st, func(upstream string) string {
		return startNginxWith(t, map[string]string{"Decide": st.srv.HTTPAddr(), "Upstream": upstream, "Token": st.edge,
			"Scheme": "https", "CA": files.ClientCAFile, "Cert": filepath.Join(dir, "nginx.pem"), "Key": filepath.Join(dir, "nginx-key.pem")})
	})
}

// checkNginx runs the requests of the documented configuration through
// the nginx start returns the address of.
func checkNginx(t *testing.T, st *stack, start func(upstream string) string) {
	t.Helper()
	var served atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		_, _ = w.Write([]byte("hello\n"))
	}))
	defer upstream.Close()
	addr := start(upstream.Listener.Addr().String())

	get := func(path string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		code, h, _ := send(t, req, "")
		return code, h
	}
	for i := 1; i <= 7; i++ {
		code, h := get("/checkout")
		switch {
		case i <= 5 && code != 200:
			t.Fatalf("request %d: %d, want 200", i, code)
		case i <= 5 && h.Get("RateLimit-Remaining") != strconv.Itoa(5-i):
			t.Fatalf("request %d: RateLimit-Remaining %q, want %d", i, h.Get("RateLimit-Remaining"), 5-i)
		case i > 5 && code != http.StatusTooManyRequests:
			t.Fatalf("request %d: %d, want 429", i, code)
		case i > 5:
			if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 3600 {
				t.Fatalf("request %d: Retry-After %q", i, h.Get("Retry-After"))
			}
			if h.Get("RateLimit-Limit") != "5" {
				t.Fatalf("request %d: RateLimit-Limit %q", i, h.Get("RateLimit-Limit"))
			}
		}
	}
	if n := served.Load(); n != 5 {
		t.Fatalf("upstream served %d requests, want the capacity, 5", n)
	}
	// A wrong credential never lets a request through.
	if code, _ := get("/wrong-token/x"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", code)
	}
	if n := served.Load(); n != 5 {
		t.Fatalf("upstream served %d requests after a wrong token", n)
	}
}
