package console

import (
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
)

// appChoice is one app of the bucket form's allowed-apps picker.
type appChoice struct {
	Name    string
	Checked bool
}

// allowedAppsOf reads the allowed apps a bucket form sends: one value per
// ticked app and the "other apps" text, each of which may hold several
// names separated by commas or spaces. It returns them as one text, the
// form's value.
func allowedAppsOf(c *gin.Context) string {
	var names []string
	for _, v := range c.PostFormArray("allowed_apps") {
		for _, n := range splitApps(v) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return strings.Join(names, ", ")
}

// renderBucketForm shows the bucket form with the picker of allowed apps:
// every app the service lists, those of the form ticked, and the form's
// apps that are not listed kept as text so that nothing typed or saved is
// lost.
func (s *server) renderBucketForm(c *gin.Context, st int, p *bucketFormPage) {
	names, more, err := s.svc.AppChoices(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	chosen := splitApps(p.Form.AllowedApps)
	p.AppChoices, p.MoreApps = make([]appChoice, 0, len(names)), more
	for _, n := range names {
		p.AppChoices = append(p.AppChoices, appChoice{Name: n, Checked: slices.Contains(chosen, n)})
	}
	var other []string
	for _, n := range chosen {
		if !slices.Contains(names, n) {
			other = append(other, n)
		}
	}
	p.OtherApps = strings.Join(other, ", ")
	p.Kinds = kindChoices
	if p.Form.Kind == "" {
		p.Form.Kind = string(buckets.KindBucket)
	}
	s.render(c, st, "bucket_form", p)
}
