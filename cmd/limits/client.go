package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/limitsfile"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// apiClient calls the JSON API of a console with a personal API token.
type apiClient struct {
	base  string // "https://sluice.example.com/api/v1"
	token string
	http  *http.Client
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Method  string
	Path    string
	Code    string
	Message string
	Fields  []struct{ Field, Reason string }
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
	for _, f := range e.Fields {
		s += fmt.Sprintf("; %s %s", f.Field, f.Reason)
	}
	return s
}

// errConflict marks a write refused because the object changed since it
// was read (412) or a rule of the live state (409).
var errConflict = errors.New("conflict")

func (e *apiError) Is(target error) bool {
	return target == errConflict && (e.Status == http.StatusPreconditionFailed || e.Status == http.StatusConflict)
}

func newClient(server, token string) *apiClient {
	return &apiClient{base: strings.TrimRight(server, "/") + "/api/v1", token: token,
		http: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a request; body (if not nil) is sent as JSON, the answer's
// JSON is decoded into out (if not nil). ifMatch > 0 sends If-Match.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any, ifMatch int64) error {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch > 0 {
		req.Header.Set("If-Match", `"`+strconv.FormatInt(ifMatch, 10)+`"`)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode, Method: method, Path: path, Message: http.StatusText(resp.StatusCode)}
		var eb struct {
			Error struct {
				Code    string
				Message string
				Fields  []struct{ Field, Reason string }
			}
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
			e.Code, e.Message, e.Fields = eb.Error.Code, eb.Error.Message, eb.Error.Fields
		}
		return e
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}

// list reads every page of a list: key is the items' key in the answer.
func list[T any](ctx context.Context, c *apiClient, path, key string) ([]T, error) {
	var all []T
	cursor := ""
	for {
		p := path + "?limit=100"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var page map[string]json.RawMessage
		if err := c.do(ctx, http.MethodGet, p, nil, &page, 0); err != nil {
			return nil, err
		}
		var items []T
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		all = append(all, items...)
		var next string
		if raw, ok := page["next_cursor"]; ok {
			_ = json.Unmarshal(raw, &next)
		}
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// The API's views, as far as the file needs them.
type appView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version"`
}

type bucketView struct {
	Name        string   `json:"name"`
	OwnerApp    string   `json:"owner_app"`
	Kind        string   `json:"kind"`
	Description string   `json:"description"`
	MaxPermits  int64    `json:"max_permits"`
	Rate        string   `json:"rate"`
	AllowedApps []string `json:"allowed_apps"`
	Keyed       bool     `json:"keyed"`
	Shadow      bool     `json:"shadow"`
	LeaseMillis int64    `json:"lease_ms"`
	QuotaPeriod string   `json:"quota_period"`
	TimeZone    string   `json:"time_zone"`
	SlotMillis  int64    `json:"slot_ms"`
	Reserve     int64    `json:"reserve"`
	Version     int64    `json:"version"`
}

type overrideView struct {
	ID          int64  `json:"id"`
	Bucket      string `json:"bucket"`
	Match       string `json:"match"`
	Key         string `json:"key"`
	Description string `json:"description"`
	MaxPermits  int64  `json:"max_permits"`
	Rate        string `json:"rate"`
	Shadow      bool   `json:"shadow"`
	Version     int64  `json:"version"`
}

// live reads every app, bucket, override and mapping the token can see.
// Mappings and overrides are read for the apps in only (all when empty).
func (c *apiClient) live(ctx context.Context, only map[string]bool) (*limitsfile.Desired, error) {
	d := &limitsfile.Desired{Overrides: map[string][]*buckets.Override{}}
	want := func(app string) bool { return len(only) == 0 || only[app] }
	as, err := list[appView](ctx, c, "/apps", "apps")
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		app := &apps.App{Name: a.Name, Description: a.Description}
		app.Version = a.Version
		d.Apps = append(d.Apps, app)
	}
	bs, err := list[bucketView](ctx, c, "/buckets", "buckets")
	if err != nil {
		return nil, err
	}
	for _, bv := range bs {
		rate, err := buckets.ParseOptionalRate(bv.Rate)
		if err != nil {
			return nil, fmt.Errorf("bucket %q: rate %q: %w", bv.Name, bv.Rate, err)
		}
		b := &buckets.Bucket{Name: bv.Name, OwnerApp: bv.OwnerApp, Kind: buckets.Kind(bv.Kind).Or(), Description: bv.Description, MaxPermits: bv.MaxPermits,
			Rate: rate, AllowedApps: bv.AllowedApps, Keyed: bv.Keyed, Shadow: bv.Shadow, LeaseMillis: bv.LeaseMillis,
			SlotMillis: bv.SlotMillis, QuotaPeriod: quota.Period(bv.QuotaPeriod), TimeZone: bv.TimeZone, Reserve: bv.Reserve}
		b.Version = bv.Version
		d.Buckets = append(d.Buckets, b)
		if !b.Keyed || !want(b.OwnerApp) {
			continue
		}
		os, err := list[overrideView](ctx, c, "/buckets/"+url.PathEscape(b.Name)+"/overrides", "overrides")
		if err != nil {
			return nil, err
		}
		for _, ov := range os {
			rate, err := buckets.ParseOptionalRate(ov.Rate)
			if err != nil {
				return nil, fmt.Errorf("bucket %q: override %q: rate %q: %w", b.Name, ov.Key, ov.Rate, err)
			}
			o := &buckets.Override{ID: ov.ID, Bucket: b.Name, Match: buckets.Match(ov.Match), Key: ov.Key,
				Description: ov.Description, MaxPermits: ov.MaxPermits, Rate: rate, Shadow: ov.Shadow}
			o.Version = ov.Version
			d.Overrides[b.Name] = append(d.Overrides[b.Name], o)
		}
	}
	for _, a := range d.Apps {
		if !want(a.Name) {
			continue
		}
		var ms struct {
			Mappings []*descriptors.Mapping `json:"mappings"`
		}
		if err := c.do(ctx, http.MethodGet, "/apps/"+url.PathEscape(a.Name)+"/mappings", nil, &ms, 0); err != nil {
			return nil, err
		}
		d.Mappings = append(d.Mappings, ms.Mappings...)
	}
	return d, nil
}

// apply makes one change.
func (c *apiClient) apply(ctx context.Context, ch *limitsfile.Change) error {
	switch {
	case ch.App != nil:
		return c.do(ctx, http.MethodPost, "/apps", map[string]any{"name": ch.App.Name, "description": ch.App.Description}, nil, 0)
	case ch.Bucket != nil:
		b := ch.Bucket
		path := "/buckets/" + url.PathEscape(b.Name)
		switch ch.Op {
		case limitsfile.Delete:
			return c.do(ctx, http.MethodDelete, path, nil, nil, ch.IfMatch)
		case limitsfile.Create:
			return c.do(ctx, http.MethodPost, "/buckets", bucketBody(b, true), nil, 0)
		default:
			return c.do(ctx, http.MethodPut, path, bucketBody(b, false), nil, ch.IfMatch)
		}
	case ch.Override != nil:
		o := ch.Override
		path := "/buckets/" + url.PathEscape(o.Bucket) + "/overrides"
		body := map[string]any{"description": o.Description, "max_permits": o.MaxPermits, "rate": o.Rate.String(), "shadow": o.Shadow}
		switch ch.Op {
		case limitsfile.Delete:
			return c.do(ctx, http.MethodDelete, path+"/"+strconv.FormatInt(ch.ID, 10), nil, nil, ch.IfMatch)
		case limitsfile.Create:
			body["match"], body["key"] = string(o.Match), o.Key
			return c.do(ctx, http.MethodPost, path, body, nil, 0)
		default:
			return c.do(ctx, http.MethodPut, path+"/"+strconv.FormatInt(ch.ID, 10), body, nil, ch.IfMatch)
		}
	default:
		m := ch.Mapping
		path := "/apps/" + url.PathEscape(m.App) + "/mappings"
		body := map[string]any{"domain": m.Domain, "entries": m.Entries, "bucket": m.Bucket, "key_from": m.KeyFrom, "description": m.Description}
		switch ch.Op {
		case limitsfile.Delete:
			return c.do(ctx, http.MethodDelete, path+"/"+strconv.FormatInt(ch.ID, 10), nil, nil, ch.IfMatch)
		case limitsfile.Create:
			return c.do(ctx, http.MethodPost, path, body, nil, 0)
		default:
			return c.do(ctx, http.MethodPut, path+"/"+strconv.FormatInt(ch.ID, 10), body, nil, ch.IfMatch)
		}
	}
}

func bucketBody(b *buckets.Bucket, create bool) map[string]any {
	body := map[string]any{"name": b.Name, "owner_app": b.OwnerApp, "description": b.Description,
		"max_permits": b.MaxPermits, "rate": b.Rate.String(), "allowed_apps": b.AllowedApps,
		"shadow": b.Shadow, "lease_ms": b.LeaseMillis, "slot_ms": b.SlotMillis}
	if b.Kind.Or() == buckets.KindQuota {
		// Only a quota has them: the API refuses them on the other kinds.
		body["quota_period"], body["time_zone"] = string(b.QuotaPeriod), b.TimeZone
	}
	if b.Kind.Or() == buckets.KindBucket {
		// Only a token bucket has a reserve.
		body["reserve"] = b.Reserve
	}
	if create {
		body["keyed"] = b.Keyed
		body["kind"] = string(b.Kind.Or())
	}
	return body
}
