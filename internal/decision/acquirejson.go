package decision

import (
	"strconv"
)

// The body of POST /v1/acquire is read and written here without
// reflection: encoding/json's decoder cost a fifth of the service's own
// work per request. parseAcquire takes only the plain form of the body and
// gives up on anything else (escapes, null, numbers with a fraction or an
// exponent, other keys or spellings), which decodeBody then reads with
// encoding/json and its messages: both must agree on every body the fast
// path takes (TestAcquireJSONAgreesWithEncodingJSON).

// parseAcquire reads raw, valid UTF-8, into dst when it is one plain JSON
// object of AcquireRequest's fields, and reports whether it was.
func parseAcquire(raw []byte, dst *AcquireRequest) bool {
	p := jsonScan{b: raw}
	var req AcquireRequest
	p.space()
	if !p.eat('{') {
		return false
	}
	more := false // a member was read: the next one follows a comma
	for p.space(); !p.eat('}'); p.space() {
		if more && !p.eat(',') {
			return false
		}
		p.space()
		if !p.member(&req) {
			return false
		}
		more = true
	}
	p.space()
	if p.i != len(p.b) {
		return false
	}
	*dst = req
	return true
}

// member reads one "key": value of AcquireRequest into req.
func (p *jsonScan) member(req *AcquireRequest) bool {
	key, ok := p.str()
	if !ok {
		return false
	}
	p.space()
	if !p.eat(':') {
		return false
	}
	p.space()
	switch key {
	case "bucket":
		req.Bucket, ok = p.str()
	case "key":
		req.Key, ok = p.str()
	case "n":
		req.N, ok = p.int()
	case "critical":
		req.Critical, ok = p.bool()
	default:
		ok = false
	}
	return ok
}

// jsonScan walks a JSON text; every method reports false, having consumed
// whatever, when the text is not of the plain form it takes.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (p *jsonScan) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// int reads an integer without fraction or exponent that fits an int64.
func (p *jsonScan) int() (int64, bool) {
	start := p.i
	p.eat('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == digits, p.b[digits] == '0' && p.i > digits+1:
		return 0, false
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

func (p *jsonScan) bool() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// appendJSON appends r as encoding/json's Encoder writes it, newline
// included. Every float is a whole number of microseconds in seconds, far
// inside the range where encoding/json writes the shortest decimal form.
func (r AcquireResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, r.Limit, 10)
	b = append(b, `,"retry_after":`...)
	b = strconv.AppendFloat(b, r.RetryAfter, 'f', -1, 64)
	b = append(b, `,"reset_after":`...)
	b = strconv.AppendFloat(b, r.ResetAfter, 'f', -1, 64)
	b = append(b, `,"would_deny":`...)
	b = strconv.AppendBool(b, r.WouldDeny)
	if r.Fallback {
		b = append(b, `,"fallback":true`...)
	}
	return append(b, "}\n"...)
}
