package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzBucketForm posts arbitrary values to the bucket and app forms and
// the list filters (BRIEF Q10): no answer is a 500, and nothing posted
// comes back unescaped.
func FuzzBucketForm(f *testing.F) {
	for _, s := range []string{"", "100/min", "0.5 per second", "<script>x</script>", "\xff\xfe", "a,b,,c",
		"9999999999999999999", "-1", "1e9", "name with space", "\x00", strings.Repeat("z", 600), `"'&<>`} {
		f.Add(s, s, s)
	}
	e := newEnv(f)
	u := e.user("olga", false)
	e.app("alpha", "olga")
	e.bucket("alpha-api", "alpha")
	b := e.browser()
	b.signIn(u)
	f.Fuzz(func(t *testing.T, name, rate, text string) {
		// The helpers report to the fuzz input's t, not to f.
		et := *e
		et.t = t
		b := &browser{e: &et, c: b.c, origin: b.origin}
		for _, r := range []response{
			b.post("/buckets", url.Values{"name": {name}, "owner_app": {"alpha"}, "max_permits": {text}, "rate": {rate},
				"description": {text}, "allowed_apps": {name}}),
			b.post("/apps", url.Values{"name": {name}, "description": {text}}),
			b.get("/buckets?q=" + url.QueryEscape(text) + "&app=" + url.QueryEscape(name) + "&after=" + url.QueryEscape(rate)),
			b.get("/buckets/alpha-api?window=" + url.QueryEscape(text)),
			b.get("/audit?bucket=" + url.QueryEscape(text) + "&app=" + url.QueryEscape(name) + "&before=" + url.QueryEscape(rate)),
		} {
			if r.status >= http.StatusInternalServerError {
				t.Fatalf("status %d for %q %q %q\n%s", r.status, name, rate, text, excerpt(r.body))
			}
			for _, in := range []string{name, rate, text} {
				if strings.ContainsAny(in, "<>\"") && len(in) > 3 && strings.Contains(r.body, in) {
					t.Fatalf("input %q echoed unescaped", in)
				}
			}
		}
	})
}
