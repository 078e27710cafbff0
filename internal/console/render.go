package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/web"
)

// pageNames are the page templates; each is parsed together with
// layout.html and partials.html into a set of its own.
var pageNames = []string{
	"login", "error",
	"apps", "app_new", "app", "app_confirm",
	"buckets", "bucket", "bucket_form", "bucket_delete", "override_delete", "override_form",
	"audit", "users", "tokens", "usage", "account",
}

// views holds the parsed templates and the checksums of static files.
type views struct {
	pages  map[string]*template.Template
	files  map[string]staticFile
	assets map[string]string // "app.css" -> "/static/app.css?v=<sum>"
	log    *slog.Logger
}

// staticFile is an embedded asset kept in memory with its checksum.
type staticFile struct {
	data []byte
	sum  string
}

func parseViews() (*views, error) {
	v := &views{pages: map[string]*template.Template{}, files: map[string]staticFile{}, assets: map[string]string{},
		log: slog.Default()}
	err := fs.WalkDir(web.Static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(web.Static, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		f := staticFile{data: data, sum: hex.EncodeToString(sum[:])[:12]}
		v.files[p] = f
		v.assets[p] = "/static/" + p + "?v=" + f.sum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load static files: %w", err)
	}
	funcs := template.FuncMap{
		"asset": func(name string) (string, error) {
			u, ok := v.assets[name]
			if !ok {
				return "", fmt.Errorf("no static file %q", name)
			}
			return u, nil
		},
		"errfor":     func(v *errs.Validation, field string) string { return v.For(field) },
		"when":       formatTime,
		"ago":        ago,
		"roughly":    roughly,
		"join":       strings.Join,
		"query":      url.QueryEscape,
		"prettyjson": prettyJSON,
		"count":      chart.Count,
		"share":      share,
		"add":        func(a, b int64) int64 { return a + b },
		"sub":        func(a, b int64) int64 { return a - b },
		"roledesc":   manage.RoleDescription,
		"until":      until,
		"gauge":      chart.Gauge,
		"slotgauge":  func(free, limit int64) template.HTML { return chart.SlotGauge(max(free, 0), limit) },
		"slotlease":  slotLeaseText,
		// whole is a token count rounded down, as the live state shows it.
		"whole": func(f float64) int64 { return int64(math.Floor(f)) },
		// dict carries named values to a partial: "dict" "Key" value ...
		"dict": dict,
		// fe carries a field's id and error text to the "fielderror" partial.
		"fe": func(id, text string) fieldError { return fieldError{ID: id, Text: text} },
		// input carries the settings of one form field to the "input" partial.
		"input": newInputField,
		// submit and confirm carry a form's buttons to the "actions" partial.
		"submit":  submitActions,
		"confirm": confirmActions,
		// stale carries a refusal of an older version to the "stale" partial.
		"stale": newStaleBanner,
	}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(web.Templates, "layout.html", "partials.html", name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		v.pages[name] = t
	}
	return v, nil
}

// fieldError is the error text shown under one form field.
type fieldError struct {
	ID   string
	Text string
}

// layout is what every page shows around its content. Pages embed it.
type layout struct {
	Title string
	// Nav names the menu entry to mark as current.
	Nav   string
	User  string
	Admin bool
	Flash *flash
}

func (l *layout) base() *layout { return l }

// page is a typed page: a struct embedding layout.
type page interface{ base() *layout }

// flash is a one-time message shown after a redirect.
type flash struct {
	Kind string // "ok" or "error"
	Text string
}

// execute renders the page template name with p and writes it with status.
// The page is rendered into memory first, so that a template error becomes
// a clean 500 rather than half a page.
func (v *views) execute(w http.ResponseWriter, status int, name string, p page) {
	t, ok := v.pages[name]
	var buf bytes.Buffer
	var err error
	if !ok {
		err = fmt.Errorf("no page template %q", name)
	} else {
		err = t.ExecuteTemplate(&buf, "layout", p)
	}
	if err != nil {
		v.log.Error("console: render page", "page", name, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("Something went wrong while showing this page. The error has been logged.\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the friendly page of every refusal and failure.
type errorPage struct {
	layout
	Status  int
	Heading string
	Message string
	Fields  []errs.FieldError
}

// renderError writes an error page outside of a gin context (cross-origin
// refusals happen before routing).
func (v *views) renderError(w http.ResponseWriter, status int, heading, message string) {
	v.execute(w, status, "error", &errorPage{layout: layout{Title: heading}, Status: status, Heading: heading, Message: message})
}

// render fills the layout of p from the request and writes the page.
func (s *server) render(c *gin.Context, status int, name string, p page) {
	l := p.base()
	l.User = username(c)
	l.Admin = isAdmin(c)
	if l.Flash == nil {
		l.Flash = takeFlash(c)
	}
	s.views.execute(c.Writer, status, name, p)
	c.Abort()
}

// flashCookie carries the message of a POST to the page it redirects to.
const flashCookie = "sluice_flash"

// redirect ends a successful POST: the browser gets the next page by GET,
// with msg shown once at the top.
func (s *server) redirect(c *gin.Context, to, msg string) {
	if msg != "" {
		http.SetCookie(c.Writer, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/",
			MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
	}
	c.Redirect(http.StatusSeeOther, to)
	c.Abort()
}

func takeFlash(c *gin.Context) *flash {
	v, err := c.Cookie(flashCookie)
	if err != nil || v == "" {
		return nil
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode})
	text, err := url.QueryUnescape(v)
	if err != nil || text == "" {
		return nil
	}
	if len(text) > 300 {
		text = text[:300]
	}
	return &flash{Kind: "ok", Text: text}
}

// static serves the embedded assets. A URL carrying the file's current
// checksum may be cached for a year; any other is revalidated.
func (s *server) static(c *gin.Context) {
	name := strings.TrimPrefix(path.Clean(c.Param("file")), "/")
	f, ok := s.views.files[name]
	if !ok {
		s.notFound(c)
		return
	}
	h := c.Writer.Header()
	if c.Query("v") == f.sum {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("ETag", `"`+f.sum+`"`)
	http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(f.data))
	c.Abort()
}

// formatTime shows a time in UTC, to the second.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago says how long ago t was, roughly, for people.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h ago"
	default:
		return strconv.Itoa(int(d.Hours()/24)) + " days ago"
	}
}

// share shows part as a percentage of whole, "—" when whole is 0.
func share(part, whole int64) string {
	if whole <= 0 {
		return "—"
	}
	p := float64(part) / float64(whole) * 100
	if p > 0 && p < 0.1 {
		return "<0.1%"
	}
	return strconv.FormatFloat(math.Round(p*10)/10, 'f', -1, 64) + "%"
}

// dict makes a map of key and value pairs, for a partial that needs more
// than one value.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: %d arguments; want pairs", len(kv))
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
