package rbac

import (
	"context"
	"fmt"
	"strings"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
)

// adapter reads Casbin rules from the casbin_rule table: one row per
// rule, ptype and up to six values. It is the one reader of the table.
// Casbin never saves through it: the Enforcer's changes go through
// transactions that also write the audit log and bump the policy revision
// (insertRule, deleteRule, bumpRevision).
type adapter struct {
	db *sqlx.DB
}

// maxFields is the number of value columns of casbin_rule (v0..v5).
const maxFields = 6

// ruleRow is one row of casbin_rule.
type ruleRow struct {
	PType string `db:"ptype"`
	V0    string `db:"v0"`
	V1    string `db:"v1"`
	V2    string `db:"v2"`
	V3    string `db:"v3"`
	V4    string `db:"v4"`
	V5    string `db:"v5"`
}

// values returns the row's values without the trailing empty ones.
func (r ruleRow) values() []string {
	v := []string{r.V0, r.V1, r.V2, r.V3, r.V4, r.V5}
	for len(v) > 0 && v[len(v)-1] == "" {
		v = v[:len(v)-1]
	}
	return v
}

// args returns ptype and rule padded to the six value columns, for INSERT
// and exact-match DELETE.
func args(ptype string, rule []string) ([]any, error) {
	if len(rule) > maxFields {
		return nil, fmt.Errorf("casbin rule %q has %d values, at most %d fit", ptype, len(rule), maxFields)
	}
	a := make([]any, 0, maxFields+1)
	a = append(a, ptype)
	for i := range maxFields {
		v := ""
		if i < len(rule) {
			v = rule[i]
		}
		a = append(a, v)
	}
	return a, nil
}

// rules reads every rule, "p" lines before "g" lines, each as ptype
// followed by its values.
func (a *adapter) rules(ctx context.Context) ([][]string, error) {
	var rows []ruleRow
	if err := a.db.SelectContext(ctx, &rows,
		`SELECT ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule ORDER BY ptype DESC, id`); err != nil {
		return nil, fmt.Errorf("load casbin rules: %w", database.Translate(err))
	}
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, append([]string{r.PType}, r.values()...))
	}
	return out, nil
}

// loadInto adds rules to m, skipping the ones its model has no section for
// (left behind by another version) rather than failing the whole load.
func loadInto(m model.Model, rules [][]string) error {
	for _, r := range rules {
		if len(r) < 2 || r[0] == "" {
			continue
		}
		if _, ok := m[r[0][:1]][r[0]]; !ok {
			continue
		}
		if err := persist.LoadPolicyArray(r, m); err != nil {
			return fmt.Errorf("load casbin rule %q: %w", strings.Join(r, ", "), err)
		}
	}
	return nil
}

// insertRule stores one rule; a rule already stored is not an error.
func insertRule(ctx context.Context, tx *database.Tx, ptype string, rule []string) error {
	a, err := args(ptype, rule)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5) VALUES (?, ?, ?, ?, ?, ?, ?)`, a...)
	if err != nil && !database.IsDuplicate(err) {
		return fmt.Errorf("insert casbin rule: %w", database.Translate(err))
	}
	return nil
}

// deleteRule deletes one rule and reports whether it was stored.
func deleteRule(ctx context.Context, tx *database.Tx, ptype string, rule []string) (bool, error) {
	a, err := args(ptype, rule)
	if err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule
		WHERE ptype = ? AND v0 = ? AND v1 = ? AND v2 = ? AND v3 = ? AND v4 = ? AND v5 = ?`, a...)
	if err != nil {
		return false, fmt.Errorf("delete casbin rule: %w", database.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete casbin rule: %w", database.Translate(err))
	}
	return n > 0, nil
}

// bump increments the policy revision inside tx. The UPDATE also locks
// the revision row until tx ends, which serializes every policy change
// across console instances: checks such as "is this the last owner"
// cannot race.
func bump(ctx context.Context, tx *database.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE policy_revision SET revision = revision + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("bump policy revision: %w", database.Translate(err))
	}
	return nil
}

// revision reads the current policy revision.
func revision(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var rev int64
	if err := sqlx.GetContext(ctx, q, &rev, `SELECT revision FROM policy_revision WHERE id = 1`); err != nil {
		return 0, fmt.Errorf("read policy revision: %w", database.Translate(err))
	}
	return rev, nil
}
