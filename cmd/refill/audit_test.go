package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

func openState(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestAuditCarriesTheRealClock: REFILL_NOW moves the planning clock, never
// the time an audit entry records; the entry keeps the "as of" time beside
// the real one.
func TestAuditCarriesTheRealClock(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	start := time.Now().UTC().Add(-time.Minute)
	r := run(t, d, []string{"REFILL_NOW=2019-01-01T00:00:00Z"}, "approve", plans[1], "--as", "bob")
	if r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	var at, asOf sql.NullString
	if err := openState(t, d).QueryRow(`SELECT at, as_of FROM audit_log WHERE event = 'approval' ORDER BY seq DESC LIMIT 1`).Scan(&at, &asOf); err != nil {
		t.Fatal(err)
	}
	when, err := time.Parse(time.RFC3339Nano, at.String)
	if err != nil || when.Before(start) {
		t.Errorf("the approval is dated %s, want the real clock (after %s)", at.String, start)
	}
	if !strings.HasPrefix(asOf.String, "2019-01-01") {
		t.Errorf("the approval's as_of is %q, want REFILL_NOW (2019-01-01)", asOf.String)
	}
	step(t, d, 0, "intact", "audit", "verify")
	if r := step(t, d, 0, "approve", "show", plans[1]); strings.Contains(r.stdout, "2019-01-01") {
		t.Errorf("show dates the approval by REFILL_NOW, not when bob approved:\n%s", r.stdout)
	}
}

// TestKeyedAuditSurvivesSomeoneWhoCanWriteTheState: with the audit key in
// the environment, an entry rewritten and re-hashed by someone without it,
// a log cut short, or a whole log re-hashed without the key, fails audit
// verify, also when the store id its anchors are found by was changed.
func TestKeyedAuditSurvivesSomeoneWhoCanWriteTheState(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	key := []string{"REFILL_AUDIT_KEY=correct horse battery staple"}
	if r := run(t, root, key, "demo", "d", "-o", "json"); r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	d := filepath.Join(root, "d")
	// The demo ran with the key in its environment: keyed from the first
	// entry, and anchored in the warehouse by its runs.
	r := run(t, d, key, "audit", "verify", "-o", "json")
	rep := decode[struct {
		OK     bool `json:"ok"`
		Keyed  bool `json:"keyed"`
		Anchor *struct {
			Seq int64 `json:"seq"`
		} `json:"anchor"`
	}](t, r.stdout)
	if r.code != 0 || !rep.OK || !rep.Keyed || rep.Anchor == nil {
		t.Fatalf("audit verify of the keyed demo: exit %d %+v\n%s", r.code, rep, r.stderr)
	}
	// Without the key the log can be neither verified nor written.
	step(t, d, 2, "keyed from entry", "audit", "verify")

	state := openState(t, d)
	var seq int64
	var e refill.Event
	var at, detail string
	if err := state.QueryRow(`SELECT seq, at, actor, event, plan_id, dataset, partition, detail, prev_hash FROM audit_log WHERE event = 'approval' LIMIT 1`).
		Scan(&seq, &at, &e.Actor, &e.Kind, &e.PlanID, &e.Dataset, &e.Partition, &detail, &e.PrevHash); err != nil {
		t.Fatal(err)
	}
	e.Seq, e.Detail = seq, json.RawMessage(strings.Replace(detail, `"note":""`, `"note":"lgtm"`, 1))
	e.At, _ = time.Parse(time.RFC3339Nano, at)
	e.Actor = "mallory"
	forged := e.ComputeHash() // what someone without the key can compute
	if _, err := state.Exec(`UPDATE audit_log SET actor = ?, detail = ?, hash = ? WHERE seq = ?`, e.Actor, string(e.Detail), forged, seq); err != nil {
		t.Fatal(err)
	}
	r = run(t, d, key, "audit", "verify")
	if r.code != 5 || !strings.Contains(r.stderr, "entry") {
		t.Fatalf("a re-hashed entry passed audit verify with the key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A log cut short after the warehouse anchored its head.
	root2 := t.TempDir()
	if r := run(t, root2, key, "demo", "d", "-o", "json"); r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	d2 := filepath.Join(root2, "d")
	s2 := openState(t, d2)
	var anchored int64
	wh, err := sql.Open("sqlite", filepath.Join(d2, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	if err := wh.QueryRow(`SELECT max(seq) FROM refill_audit_anchor`).Scan(&anchored); err != nil {
		t.Fatal(err)
	}
	var head int64
	var hash string
	if err := s2.QueryRow(`SELECT seq, hash FROM audit_log WHERE seq = ?`, anchored-1).Scan(&head, &hash); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM audit_log WHERE seq >= ?`, `UPDATE audit_head SET seq = ? - 1`} {
		if _, err := s2.Exec(q, anchored); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s2.Exec(`UPDATE audit_head SET hash = ?`, hash); err != nil {
		t.Fatal(err)
	}
	// Someone covering their tracks drops the verification checkpoint too;
	// only the warehouse's anchor still remembers how far the log went.
	if _, err := s2.Exec(`DELETE FROM audit_checkpoint`); err != nil {
		t.Fatal(err)
	}
	if r := run(t, d2, key, "audit", "verify"); r.code != 5 || !strings.Contains(r.stderr, "anchor") {
		t.Fatalf("a truncated log passed audit verify: exit %d\n%s", r.code, r.stderr)
	}
	// The anchors are found by the store's id, which lives in the state
	// store too: changing it must not make them vanish.
	if _, err := s2.Exec(`UPDATE refill_meta SET store_id = 'someone-else'`); err != nil {
		t.Fatal(err)
	}
	if r := run(t, d2, key, "audit", "verify"); r.code != 5 || !strings.Contains(r.stderr, "the warehouse holds audit anchors of another state store") ||
		!strings.Contains(r.stderr, "the store id may have been changed") {
		t.Fatalf("a truncated log under a new store id passed audit verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The whole first log re-hashed without the key, mallory's approval
	// and all, and no longer marked keyed: a chain that holds in itself.
	rehashUnkeyed(t, state)
	r = run(t, d, key, "audit", "verify")
	if r.code != 5 || !strings.Contains(r.stderr, "downgraded") {
		t.Fatalf("a log re-hashed without the key passed audit verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := state.Exec(`UPDATE refill_meta SET store_id = 'someone-else'`); err != nil {
		t.Fatal(err)
	}
	r = run(t, d, key, "audit", "verify")
	if r.code != 5 || !strings.Contains(r.stderr, "the store id may have been changed") || !strings.Contains(r.stderr, "downgraded") {
		t.Fatalf("a log re-hashed without the key, under a new store id, passed audit verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// rehashUnkeyed plays someone without the audit key who rewrites the
// whole log with plain hashes, marks it never keyed and drops the
// verification checkpoint.
func rehashUnkeyed(t *testing.T, state *sql.DB) {
	t.Helper()
	rows, err := state.Query(`SELECT seq, at, as_of, actor, event, plan_id, dataset, partition, detail FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var log []refill.Event
	for rows.Next() {
		var (
			e      refill.Event
			at     string
			asOf   sql.NullString
			detail string
		)
		if err := rows.Scan(&e.Seq, &at, &asOf, &e.Actor, &e.Kind, &e.PlanID, &e.Dataset, &e.Partition, &detail); err != nil {
			t.Fatal(err)
		}
		e.Detail = json.RawMessage(detail)
		if e.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			t.Fatal(err)
		}
		if asOf.Valid {
			if e.AsOf, err = time.Parse(time.RFC3339Nano, asOf.String); err != nil {
				t.Fatal(err)
			}
		}
		log = append(log, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	prev := refill.GenesisHash
	for _, e := range log {
		e.PrevHash = prev
		e.Hash = e.ComputeHash()
		if _, err := state.Exec(`UPDATE audit_log SET prev_hash = ?, hash = ? WHERE seq = ?`, e.PrevHash, e.Hash, e.Seq); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
	}
	for _, q := range []string{`UPDATE audit_head SET hash = '` + prev + `', keyed_from = NULL`, `DELETE FROM audit_checkpoint`} {
		if _, err := state.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCommandJobsSeeOnlyWhatTheyDeclare: a command job gets PATH, HOME,
// REFILL_* (never the audit key) and the variables it names, nothing else
// of refill's environment.
func TestCommandJobsSeeOnlyWhatTheyDeclare(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  env:
    job:
      command: ["sh", "-c", "env | sort > env-{{partition}}.txt"]
      env: [PASSED_THROUGH, FIXED=yes]
`)
	extra := []string{"PASSED_THROUGH=ok", "AWS_SECRET_ACCESS_KEY=leak", "REFILL_AUDIT_KEY=k", "REFILL_TEAM=data"}
	r := run(t, dir, extra, "plan", "env", "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	id := decode[planJSON](t, r.stdout).ID
	if r := run(t, dir, extra, "approve", id, "--as", "bob"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	if r := run(t, dir, extra, "apply", id, "--as", "alice"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	got := mustRead(t, filepath.Join(dir, "env-2026-11-01.txt"))
	for _, want := range []string{"PASSED_THROUGH=ok", "FIXED=yes", "REFILL_TEAM=data", "REFILL_PARTITION=2026-11-01", "REFILL_WAREHOUSE=sqlite:" + filepath.Join(dir, "wh.db"), "PATH="} {
		if !strings.Contains(got, want) {
			t.Errorf("the job's environment lacks %s:\n%s", want, got)
		}
	}
	for _, leak := range []string{"AWS_SECRET_ACCESS_KEY", "REFILL_AUDIT_KEY"} {
		if strings.Contains(got, leak) {
			t.Errorf("the job's environment has %s:\n%s", leak, got)
		}
	}
}

// TestAuditVerifyWithoutTheWarehouse: with the warehouse unreachable, audit
// verify walks the log without the anchor and says so, in text and in JSON
// alike, and a tampered entry still fails it.
func TestAuditVerifyWithoutTheWarehouse(t *testing.T) {
	t.Parallel()
	d := setup(t)
	base, err := os.ReadFile(filepath.Join(d, "refill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(d, "unreachable.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(base), "warehouse: sqlite:warehouse.db", "warehouse: postgres://refill:s3cr3tpw@127.0.0.1:1/wh?sslmode=disable&connect_timeout=2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const note = "the warehouse is unreachable, so the anchor was not checked"
	r := step(t, d, 0, note, "audit", "verify", "--config", cfg)
	if !strings.Contains(r.stdout, "127.0.0.1:1") || strings.Contains(r.stdout, "s3cr3tpw") {
		t.Errorf("the note should say where the warehouse is, never its password:\n%s", r.stdout)
	}
	var rep struct {
		Entries    int    `json:"entries"`
		AnchorNote string `json:"anchor_note"`
	}
	if err := json.Unmarshal([]byte(step(t, d, 0, "", "audit", "verify", "--config", cfg, "-o", "json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Entries == 0 || !strings.Contains(rep.AnchorNote, note) {
		t.Errorf("audit verify -o json: %d entries, anchor_note %q; want the note to say the warehouse is unreachable", rep.Entries, rep.AnchorNote)
	}
	if _, err := openState(t, d).Exec(`UPDATE audit_log SET actor = 'mallory' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 5, "", "audit", "verify", "--config", cfg)
}
