package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoredEscapesNeverReachTheTerminal: escape sequences written into
// the state store by hand — a plan's reason in the list's column and an
// approval's note (its body is sealed by its audit entry, and rewriting it
// makes the plan refused) — reach the real stdout of show and plans only
// as visible escapes.
func TestStoredEscapesNeverReachTheTerminal(t *testing.T) {
	t.Parallel()
	d := setup(t)
	const evil = "\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)\x1b[0m"
	db, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The demo's semi-auto plan: bob approved it, and it ran.
	var id string
	if err := db.QueryRow(`SELECT plans.id FROM plans JOIN approvals ON approvals.plan_id = plans.id
		WHERE plans.tier = 'semi-auto' AND plans.status = 'applied' LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE plans SET reason = ? WHERE id = ?`, []any{evil, id}},
		{`UPDATE approvals SET note = ? WHERE plan_id = ?`, []any{evil, id}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	for _, args := range [][]string{{"show", id}, {"plans"}} {
		r := step(t, d, 0, `\u001b[2J\u001b[H\u001b[32mApproved by`, args...)
		if strings.Contains(r.stdout+r.stderr, "\x1b") {
			t.Errorf("refill %s prints ESC raw:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
}
