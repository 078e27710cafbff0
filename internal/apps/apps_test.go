package apps

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		app    App
		fields []string
	}{
		{App{Name: "shop"}, nil},
		{App{Name: "shop-api.v2_x", Description: "Handles checkout.\nOwned by team A."}, nil},
		{App{Name: "0"}, nil},
		{App{Name: strings.Repeat("a", 63)}, nil},
		{App{Name: ""}, []string{"name"}},
		{App{Name: strings.Repeat("a", 64)}, []string{"name"}},
		{App{Name: "Shop"}, []string{"name"}},
		{App{Name: "_shop"}, []string{"name"}},
		{App{Name: "sh op"}, []string{"name"}},
		{App{Name: "shop\n"}, []string{"name"}},
		{App{Name: "a{b}"}, []string{"name"}},
		{App{Name: "a,b"}, []string{"name"}},
		{App{Name: "a*"}, []string{"name"}},
		{App{Name: "a/b"}, []string{"name"}},
		{App{Name: "\u0430pp"}, []string{"name"}}, // Cyrillic a
		{App{Name: "shop", Description: strings.Repeat("\u00fc", 500)}, nil},
		{App{Name: "shop", Description: strings.Repeat("x", 501)}, []string{"description"}},
		{App{Name: "shop", Description: "\x1b[31m"}, []string{"description"}},
		{App{Name: "shop", Description: "\xc3\x28"}, []string{"description"}},
		{App{Name: "", Description: "\x00"}, []string{"name", "description"}},
	}
	for _, tt := range tests {
		err := tt.app.Validate()
		if err != nil && !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v; want a *errs.Validation", tt.app, err)
			continue
		}
		var got []string
		if v := errs.Fields(err); v != nil {
			for _, f := range v.Fields {
				got = append(got, f.Field)
			}
		}
		if !slices.Equal(got, tt.fields) {
			t.Errorf("Validate(%q, %q) invalid fields %v (%v); want %v", tt.app.Name, tt.app.Description, got, err, tt.fields)
		}
	}
}
