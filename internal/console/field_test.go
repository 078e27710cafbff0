package console

import (
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestInputField(t *testing.T) {
	v := &errs.Validation{}
	v.Add("rate", "is not a rate")
	f, err := newInputField("name", "rate", "id", "o_rate", "label", "Refill rate", "hint", "“0.5/s”.",
		"value", "x", "required", true, "errors", v)
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != "text" || f.Error != "is not a rate" || !f.Required {
		t.Errorf("field %+v", f)
	}
	// The hint is the input's, the error the form field's.
	if got := f.DescribedBy(); got != "o_rate-hint rate-error" {
		t.Errorf("described by %q", got)
	}
	f, err = newInputField("name", "user", "label", "User", "errors", (*errs.Validation)(nil))
	if err != nil || f.ID != "user" || f.DescribedBy() != "" {
		t.Errorf("plain field %+v, %v", f, err)
	}
}

func TestInputFieldRefusesBadSettings(t *testing.T) {
	for _, args := range [][]any{
		{"name", "a"},          // no label
		{"name", "a", "label"}, // odd
		{"name", "a", "label", "A", "colour", "red"}, // unknown
		{"name", "a", "label", "A", "required", "yes"},
		{"name", "a", "label", "A", "value", 3},
		{"name", "a", "label", "A", "errors", "none"},
		{"name", "a", "label", "A", "error", "set by errors only"},
	} {
		if _, err := newInputField(args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
