package sso

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Mapping turns the provider's groups into console roles. It is
// configuration, read at start-up: admin groups, and group=app:role pairs.
type Mapping struct {
	// AdminGroups give the global admin role.
	AdminGroups []string
	// Apps give a role on an app.
	Apps []AppRole
}

// AppRole gives members of Group the role Role ("owner" or "viewer") on
// App.
type AppRole struct {
	Group, App, Role string
}

// Granted is what a person's groups give.
type Granted struct {
	Admin bool
	// Apps holds the highest role given on each app.
	Apps map[string]string
}

// ParseAppRoles reads "group=app:role" items, as the -oidc-app-roles
// setting lists them.
func ParseAppRoles(items []string) ([]AppRole, error) {
	var out []AppRole
	for _, item := range items {
		group, rest, ok1 := strings.Cut(item, "=")
		app, role, ok2 := strings.Cut(rest, ":")
		group, app, role = strings.TrimSpace(group), strings.TrimSpace(app), strings.TrimSpace(role)
		switch {
		case !ok1 || !ok2 || group == "":
			return nil, fmt.Errorf("%q: want group=app:role", item)
		case !names.Valid(app):
			return nil, fmt.Errorf("%q: %q is not an app name", item, app)
		case role != "owner" && role != "viewer":
			return nil, fmt.Errorf("%q: the role must be owner or viewer", item)
		}
		out = append(out, AppRole{Group: group, App: app, Role: role})
	}
	return out, nil
}

// Grant returns what groups give under m. Group names are compared
// exactly, as providers spell them.
func (m Mapping) Grant(groups []string) Granted {
	g := Granted{Apps: map[string]string{}}
	for _, a := range m.AdminGroups {
		if slices.Contains(groups, a) {
			g.Admin = true
		}
	}
	for _, a := range m.Apps {
		if !slices.Contains(groups, a.Group) {
			continue
		}
		if g.Apps[a.App] != "owner" {
			g.Apps[a.App] = a.Role
		}
	}
	return g
}
