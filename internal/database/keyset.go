package database

import "slices"

// Keyset ends a keyset-paged read, the way every paged list of the stores
// reads: rows were read limit+1 away from the cursor, toward the end of
// the list, or toward its start when backward (then in reverse order). It
// returns the page in list order and the indexes in it of the rows whose
// cursors lead to the next and to the previous page, -1 where there is
// none. A page read forward from a cursor (fromCursor) has a previous
// page; one read backward always has a next one.
func Keyset[T any](rows []T, limit int, backward, fromCursor bool) (page []T, next, prev int) {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	next, prev = -1, -1
	if backward {
		slices.Reverse(rows)
		if more {
			prev = 0
		}
		if len(rows) > 0 {
			next = len(rows) - 1
		}
		return rows, next, prev
	}
	if more {
		next = len(rows) - 1
	}
	if fromCursor && len(rows) > 0 {
		prev = 0
	}
	return rows, next, prev
}
