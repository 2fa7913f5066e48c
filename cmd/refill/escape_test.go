package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestStoredEscapesNeverReachTheTerminal: escape sequences written into
// the state store by hand — a plan's reason (its list column, and its body,
// rehashed) and an approval's note — reach the real stdout of show, plans
// and history only as visible escapes.
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
	var id, body string
	if err := db.QueryRow(`SELECT plans.id, plans.body FROM plans JOIN approvals ON approvals.plan_id = plans.id
		WHERE plans.tier = 'semi-auto' AND plans.status = 'applied' LIMIT 1`).Scan(&id, &body); err != nil {
		t.Fatal(err)
	}
	var p refill.Plan
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	p.Request.Reason = evil
	p.Hash = p.ComputeHash()
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE plans SET body = ?, hash = ?, reason = ? WHERE id = ?`, []any{string(b), p.Hash, evil, id}},
		{`UPDATE approvals SET note = ? WHERE plan_id = ?`, []any{evil, id}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	partition := p.Steps[0].Partitions[0].Partition
	for _, args := range [][]string{{"show", id}, {"plans"}, {"history", p.Steps[0].Dataset, "--partition", partition}} {
		r := step(t, d, 0, `\u001b[2J\u001b[H\u001b[32mApproved by`, args...)
		if strings.Contains(r.stdout+r.stderr, "\x1b") {
			t.Errorf("refill %s prints ESC raw:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
}
