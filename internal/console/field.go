package console

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/errs"
)

// inputField is one labelled input of a form, with its hint and its inline
// error, as the "input" partial renders it: every form field of the
// console is marked up and tied to its hint and error the same way.
type inputField struct {
	// Name is the form field and the name of its error; ID defaults to it
	// (a page with two forms prefixes the IDs of one).
	Name, ID     string
	Label, Hint  string
	Type         string // "text" when empty
	Value        string
	InputMode    string
	Autocomplete string
	List         string // id of a datalist
	Min          string
	Required     bool
	NoSpellcheck bool
	Error        string
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
		val := pairs[i+1]
		var ok bool
		switch key {
		case "errors":
			v, ok = val.(*errs.Validation)
			ok = ok || val == nil
		case "required":
			f.Required, ok = val.(bool)
		case "nospellcheck":
			f.NoSpellcheck, ok = val.(bool)
		default:
			ok = f.set(key, val)
		}
		if !ok {
			return f, fmt.Errorf("input: bad setting %v = %v", pairs[i], val)
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

// set sets the text setting key to val, or reports that there is no
// such setting or val is not text.
func (f *inputField) set(key string, val any) bool {
	var p *string
	switch key {
	case "name":
		p = &f.Name
	case "id":
		p = &f.ID
	case "label":
		p = &f.Label
	case "hint":
		p = &f.Hint
	case "type":
		p = &f.Type
	case "value":
		p = &f.Value
	case "inputmode":
		p = &f.InputMode
	case "autocomplete":
		p = &f.Autocomplete
	case "list":
		p = &f.List
	case "min":
		p = &f.Min
	}
	s, ok := val.(string)
	if p == nil || !ok {
		return false
	}
	*p = s
	return true
}
