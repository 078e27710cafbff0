package buckets

import "github.com/sluicehq/sluice/internal/errs"

func validationFields(err error) []string {
	v := errs.Fields(err)
	if v == nil {
		return nil
	}
	out := make([]string, len(v.Fields))
	for i, f := range v.Fields {
		out[i] = f.Field
	}
	return out
}
