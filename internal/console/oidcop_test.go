package console

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// testOP is an OpenID Connect provider run by a test: zitadel's op package
// (a certified implementation of the protocol) on a minimal in-memory
// storage written here. Its login page asks for a user name; each user has
// a subject and groups the test changes between sign-ins. The test can
// make it issue ID tokens for another client or already expired.
type testOP struct {
	t        *testing.T
	issuer   string
	clientID string
	secret   string
	key      *rsa.PrivateKey
	keyID    string
	provider *op.Provider

	mu       sync.Mutex
	redirect string
	users    map[string]*opUser
	requests map[string]*opRequest
	codes    map[string]string // code -> request id
	// issueFor, when set, is the client the ID tokens issued next are for
	// (their audience and authorized party), whoever asked.
	issueFor string
	// lifetime is the ID tokens' lifetime; negative issues expired ones.
	lifetime time.Duration
	// callbacks are the redirects to the client's callback, in order.
	callbacks []string
}

type opUser struct {
	subject string
	groups  []string
}

// newTestOP starts a provider on loopback for the client clientID.
func newTestOP(t *testing.T, clientID, secret string) *testOP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := &testOP{t: t, issuer: "http://" + ln.Addr().String(), clientID: clientID, secret: secret, key: key, keyID: "k1",
		users: map[string]*opUser{}, requests: map[string]*opRequest{}, codes: map[string]string{}, lifetime: 5 * time.Minute}
	cfg := &op.Config{CodeMethodS256: true, SupportedScopes: []string{"openid", "profile", "email", "groups"}}
	if _, err := rand.Read(cfg.CryptoKey[:]); err != nil {
		t.Fatal(err)
	}
	o.provider, err = op.NewProvider(cfg, &opStorage{o}, op.StaticIssuer(o.issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", o.login)
	mux.Handle("/", o.recordCallbacks(o.provider))
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

// setRedirect registers the client's callback URL.
func (o *testOP) setRedirect(u string) { o.mu.Lock(); o.redirect = u; o.mu.Unlock() }

// setUser creates or changes a user at the provider.
func (o *testOP) setUser(name, subject string, groups ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.users[name] = &opUser{subject: subject, groups: groups}
}

func (o *testOP) setIssueFor(clientID string) { o.mu.Lock(); o.issueFor = clientID; o.mu.Unlock() }

func (o *testOP) setLifetime(d time.Duration) { o.mu.Lock(); o.lifetime = d; o.mu.Unlock() }

// lastCallback is the last redirect the provider sent to the client's
// callback, code and state included.
func (o *testOP) lastCallback() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.callbacks) == 0 {
		o.t.Fatal("the provider sent nobody back to the console")
	}
	return o.callbacks[len(o.callbacks)-1]
}

// walk follows a sign-in through the provider without a browser, from the
// authorization URL the console redirected to, signing in as user, and
// returns the redirect to the console's callback.
func (o *testOP) walk(t *testing.T, authURL, user string) string {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode/100 != 3 || loc == "" {
			t.Fatalf("%s: status %d, no redirect", resp.Request.URL, resp.StatusCode)
		}
		if strings.HasPrefix(loc, "/") {
			loc = o.issuer + loc
		}
		return loc
	}
	login := next(c.Get(authURL))
	u, err := url.Parse(login)
	if err != nil {
		t.Fatal(err)
	}
	done := next(c.PostForm(o.issuer+"/login", url.Values{"authRequestID": {u.Query().Get("authRequestID")}, "user": {user}}))
	return next(c.Get(done))
}

// recordCallbacks notes every redirect to the client's callback.
func (o *testOP) recordCallbacks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&locationRecorder{ResponseWriter: w, o: o}, r)
	})
}

type locationRecorder struct {
	http.ResponseWriter
	o *testOP
}

func (l *locationRecorder) WriteHeader(status int) {
	if loc := l.Header().Get("Location"); status/100 == 3 && loc != "" {
		l.o.mu.Lock()
		if l.o.redirect != "" && strings.HasPrefix(loc, l.o.redirect) {
			l.o.callbacks = append(l.o.callbacks, loc)
		}
		l.o.mu.Unlock()
	}
	l.ResponseWriter.WriteHeader(status)
}

// login is the provider's sign-in page: a user name, no password (the
// provider's own authentication is not what is tested).
func (o *testOP) login(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("authRequestID")
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Test provider</title><h1>Test provider</h1>
<form method="post" action="/login"><input type="hidden" name="authRequestID" value="%s">
<label for="op-user">User</label><input id="op-user" name="user"><button id="op-submit" type="submit">Sign in</button></form>`,
			html.EscapeString(id))
		return
	}
	o.mu.Lock()
	req, okReq := o.requests[id]
	u, okUser := o.users[r.FormValue("user")]
	if okReq && okUser {
		req.subject, req.done, req.authTime = u.subject, true, time.Now()
		req.issueFor = o.issueFor
	}
	o.mu.Unlock()
	if !okReq || !okUser {
		http.Error(w, "unknown user or request", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(o.provider)(op.ContextWithIssuer(r.Context(), o.issuer), id), http.StatusFound)
}

// opRequest is one authorization request (op.AuthRequest).
type opRequest struct {
	id       string
	req      oidc.AuthRequest
	subject  string
	issueFor string
	authTime time.Time
	done     bool
}

func (r *opRequest) GetID() string          { return r.id }
func (r *opRequest) GetACR() string         { return "" }
func (r *opRequest) GetAMR() []string       { return []string{"pwd"} }
func (r *opRequest) GetAuthTime() time.Time { return r.authTime }
func (r *opRequest) GetClientID() string {
	if r.issueFor != "" {
		return r.issueFor
	}
	return r.req.ClientID
}
func (r *opRequest) GetNonce() string { return r.req.Nonce }
func (r *opRequest) GetRedirectURI() string {
	return r.req.RedirectURI
}
func (r *opRequest) GetResponseType() oidc.ResponseType { return r.req.ResponseType }
func (r *opRequest) GetResponseMode() oidc.ResponseMode { return r.req.ResponseMode }
func (r *opRequest) GetScopes() []string                { return r.req.Scopes }
func (r *opRequest) GetState() string                   { return r.req.State }
func (r *opRequest) GetSubject() string                 { return r.subject }
func (r *opRequest) Done() bool                         { return r.done }
func (r *opRequest) GetAudience() []string              { return []string{r.GetClientID()} }
func (r *opRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if r.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: r.req.CodeChallenge, Method: r.req.CodeChallengeMethod}
}

// opClient is the console's registration (op.Client).
type opClient struct{ o *testOP }

func (c opClient) GetID() string {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	if c.o.issueFor != "" {
		return c.o.issueFor
	}
	return c.o.clientID
}
func (c opClient) RedirectURIs() []string {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return []string{c.o.redirect}
}
func (c opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c opClient) GrantTypes() []oidc.GrantType         { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c opClient) LoginURL(id string) string            { return c.o.issuer + "/login?authRequestID=" + id }
func (c opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c opClient) DevMode() bool                        { return true } // plain http on loopback
func (c opClient) IsScopeAllowed(string) bool           { return true }
func (c opClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c opClient) ClockSkew() time.Duration             { return 0 }
func (c opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c opClient) IDTokenLifetime() time.Duration {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return c.o.lifetime
}

type opKey struct {
	id  string
	key any
}

func (k opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k opKey) Use() string                                 { return "sig" }
func (k opKey) Key() any                                    { return k.key }
func (k opKey) ID() string                                  { return k.id }

var errOPNotFound = errors.New("not found")

// opStorage is op.Storage in memory: authorization requests and codes;
// no refresh tokens, no JWT profile.
type opStorage struct{ o *testOP }

func (s *opStorage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	id := randomID()
	r := &opRequest{id: id, req: *req}
	s.o.mu.Lock()
	s.o.requests[id] = r
	s.o.mu.Unlock()
	return r, nil
}

func (s *opStorage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	if r, ok := s.o.requests[id]; ok {
		return r, nil
	}
	return nil, errOPNotFound
}

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.o.mu.Lock()
	id, ok := s.o.codes[code]
	s.o.mu.Unlock()
	if !ok {
		return nil, errOPNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *opStorage) SaveAuthCode(_ context.Context, id, code string) error {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	s.o.codes[code] = id
	return nil
}

func (s *opStorage) DeleteAuthRequest(_ context.Context, id string) error {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	delete(s.o.requests, id)
	for code, rid := range s.o.codes {
		if rid == id {
			delete(s.o.codes, code)
		}
	}
	return nil
}

func (s *opStorage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return randomID(), time.Now().Add(5 * time.Minute), nil
}

func (s *opStorage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("no refresh tokens")
}

func (s *opStorage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *opStorage) TerminateSession(context.Context, string, string) error { return nil }

func (s *opStorage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *opStorage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	return opKey{id: s.o.keyID, key: s.o.key}, nil
}

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{opKey{id: s.o.keyID, key: &s.o.key.PublicKey}}, nil
}

func (s *opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.o.mu.Lock()
	known := id == s.o.clientID || (s.o.issueFor != "" && id == s.o.issueFor)
	s.o.mu.Unlock()
	if !known {
		return nil, errOPNotFound
	}
	return opClient{s.o}, nil
}

func (s *opStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.o.clientID || secret != s.o.secret {
		return errors.New("wrong client credentials")
	}
	return nil
}

// userinfo fills the claims of the user with subject: a user name, an
// e-mail address and the groups.
func (s *opStorage) userinfo(info *oidc.UserInfo, subject string) error {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	for name, u := range s.o.users {
		if u.subject == subject {
			info.Subject = subject
			info.PreferredUsername = name
			info.Email = name + "@example.com"
			info.AppendClaims("groups", slices.Clone(u.groups))
			return nil
		}
	}
	return errOPNotFound
}

func (s *opStorage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, subject, _ string, _ []string) error {
	return s.userinfo(info, subject)
}

func (s *opStorage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	return s.userinfo(info, subject)
}

func (s *opStorage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("no introspection")
}

func (s *opStorage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errOPNotFound
}

func (s *opStorage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *opStorage) Health(context.Context) error { return nil }

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
