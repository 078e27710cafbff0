package console

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/internal/errs"
)

// inputField is one labelled input of a form, with its hint and its inline
// error, as the "input" partial renders it: every text input of the
// console is marked up and tied to its hint and error the same way.
type inputField struct {
	// Name is the form field and the name of its error; ID defaults to it
	// (a page with two forms prefixes the IDs of one).
	Name, ID     string
	Label, Hint  string
	Type         string // "text" when empty
	Value        string
	Placeholder  string
	InputMode    string
	Autocomplete string
	Required     bool
	NoSpellcheck bool
	// Grow lets the field take the room left in its row (the search box
	// of a list's toolbar).
	Grow  bool
	Error string
}

// DescribedBy is the aria-describedby of the input: its hint, its error.
func (f inputField) DescribedBy() string {
	var ids []string
	if f.Hint != "" {
		ids = append(ids, f.ID+"-hint")
	}
	if f.Error != "" {
		ids = append(ids, f.Name+"-error")
	}
	return strings.Join(ids, " ")
}

// newInputField reads the "input" template function's arguments: pairs
// of a setting's name and value. "errors" takes the form's
// *errs.Validation, of which the field's own error is shown.
func newInputField(pairs ...any) (inputField, error) {
	var f inputField
	if len(pairs)%2 != 0 {
		return f, fmt.Errorf("input: %d arguments, want name and value pairs", len(pairs))
	}
	var v *errs.Validation
	for i := 0; i < len(pairs); i += 2 {
		key, _ := pairs[i].(string)
		if key == "errors" {
			var ok bool
			if v, ok = pairs[i+1].(*errs.Validation); !ok && pairs[i+1] != nil {
				return f, fmt.Errorf("input: errors is a %T, want a *errs.Validation", pairs[i+1])
			}
			continue
		}
		if err := f.set(key, pairs[i+1]); err != nil {
			return f, err
		}
	}
	if f.Name == "" || f.Label == "" {
		return f, fmt.Errorf("input: a field needs a name and a label")
	}
	if f.ID == "" {
		f.ID = f.Name
	}
	if f.Type == "" {
		f.Type = "text"
	}
	f.Error = v.For(f.Name)
	return f, nil
}

// set sets the setting key (a field's name in lower case) to val, which
// must have the field's type. The error text is not a setting.
func (f *inputField) set(key string, val any) error {
	fv := reflect.ValueOf(f).Elem().FieldByNameFunc(func(n string) bool { return strings.EqualFold(n, key) })
	if !fv.IsValid() || key == "error" {
		return fmt.Errorf("input: no setting %q", key)
	}
	v := reflect.ValueOf(val)
	if !v.IsValid() || v.Type() != fv.Type() {
		return fmt.Errorf("input: %s is a %T, want a %s", key, val, fv.Type())
	}
	fv.Set(v)
	return nil
}

// formActions are the buttons that end a form, as the "actions" partial
// renders them: the submit button, and a link that leaves the form
// without sending it.
type formActions struct {
	Button string
	// Danger marks a button that deletes or revokes.
	Danger bool
	// Back is where the link leads; Cancel is its text.
	Back, Cancel string
}

// submitActions end a form that saves; "Cancel" leads back.
func submitActions(button, back string) formActions {
	return formActions{Button: button, Back: back, Cancel: "Cancel"}
}

// confirmActions end a page that asks before deleting or revoking; "Keep
// it" leads back, unless a cancel text says otherwise.
func confirmActions(button, back string, cancel ...string) formActions {
	a := formActions{Button: button, Danger: true, Back: back, Cancel: "Keep it"}
	if len(cancel) > 0 && cancel[0] != "" {
		a.Cancel = cancel[0]
	}
	return a
}

// staleBanner is the one banner of a change refused because it was based
// on an older version (an *errs.Stale), as the "stale" partial renders it
// on every page: the same element and the refusal's own sentence.
type staleBanner struct {
	// Err is the refusal; its message is the banner's sentence.
	Err error
	// Current, on an edit form, is the newer version (a *buckets.Bucket
	// or a *buckets.Override): its author, version and time, and the
	// values the page's "stalevalues" template shows. Nil on a page that
	// shows the stored values itself (a delete).
	Current any
	// Discard, on an edit form, leaves the form, dropping the user's
	// values.
	Discard string
}

// newStaleBanner is the "stale" template function: the refusal and, on an
// edit form, the newer version and the way out of the form.
func newStaleBanner(err error, form ...any) staleBanner {
	b := staleBanner{Err: err}
	if len(form) == 2 {
		b.Current = form[0]
		b.Discard, _ = form[1].(string)
	}
	return b
}
