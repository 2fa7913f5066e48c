// Package demo writes a self-contained replay of the incident refill exists
// for: a SQLite (or, in a refill built with -tags duckdb, DuckDB) warehouse
// with two months of events with weekly seasonality,
// a source whose upstream schema change left 72 hours broken, an aggregate
// built on it, a billing table and a partner export — and the refill.yaml
// that describes them.
package demo

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the demo warehouse is an embedded SQLite file

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/warehouse"
)

// RemappedAgo is how many days before today the upstream sent every event
// as 'unknown' for one day: a day no walkthrough step plans over, far from
// the broken 72 hours.
const RemappedAgo = 33

// Days of history the demo warehouse holds before today.
const Days = 65

// marker heads every config the demo writes, so a rerun knows it may
// replace the directory's contents and never touches anything else.
const marker = "# written by `refill demo`"

// schemaLine heads the demo's config: editors that speak the YAML
// language server complete and check it against refill.schema.json, which
// the demo writes beside it (refill config schema).
const schemaLine = "# yaml-language-server: $schema=./refill.schema.json\n"

// Scenario describes what was written, so the walkthrough can name dates.
type Scenario struct {
	Dir    string
	Config string
	// Today is the demo's clock; data runs from Today-Days to Today-1.
	Today time.Time
	// BrokenFrom..BrokenTo are the 72 hours the upstream schema change broke.
	BrokenFrom, BrokenTo string
	// Rows is the total row count of events_raw.
	Rows int
	// Engine is the warehouse's engine, "sqlite" or "duckdb", and
	// Warehouse its file's name in Dir.
	Engine, Warehouse string
}

// Engines are the warehouse engines the demo can be written in: DuckDB
// only in a refill built with -tags duckdb.
func Engines() []string {
	if warehouse.OpenDuckDB == nil {
		return []string{"sqlite"}
	}
	return []string{"sqlite", "duckdb"}
}

// open opens the demo's warehouse for writing fixtures: on DuckDB through
// the warehouse's own handle, as a process opens a DuckDB file once.
func (s *Scenario) open() (*sql.DB, func(), error) {
	path := filepath.Join(s.Dir, s.Warehouse)
	if s.Engine == "duckdb" {
		if warehouse.OpenDuckDB == nil {
			return nil, nil, refill.BadInputf("this refill was built without DuckDB; build it with -tags duckdb")
		}
		wh, err := warehouse.OpenDuckDB(path)
		if err != nil {
			return nil, nil, err
		}
		return wh.(interface{ DB() *sql.DB }).DB(), func() { wh.Close() }, nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+dsn.SQLiteWAL)
	if err != nil {
		return nil, nil, err
	}
	return db, func() { db.Close() }, nil
}

// Day formats the day n days before today.
func (s *Scenario) Day(n int) string { return s.Today.AddDate(0, 0, -n).Format("2006-01-02") }

// Write builds the demo in dir. A directory that holds anything other than
// a previous demo is refused, so the demo never overwrites a user's files.
func Write(ctx context.Context, dir string, today time.Time) (*Scenario, error) {
	return WriteOn(ctx, dir, today, "sqlite")
}

// WriteOn is Write with the warehouse in engine: "sqlite", or "duckdb"
// (a refill built with -tags duckdb). On DuckDB the partner export is a
// query job that records what it would deliver: the demo's export script
// speaks SQLite, through sqlite3.
func WriteOn(ctx context.Context, dir string, today time.Time, engine string) (*Scenario, error) {
	if !slices.Contains(Engines(), engine) {
		if engine == "duckdb" {
			return nil, refill.BadInputf("--warehouse duckdb: this refill was built without DuckDB; build it with -tags duckdb (go build -tags duckdb ./cmd/refill)")
		}
		return nil, refill.BadInputf("--warehouse %q: want one of %s", engine, strings.Join(Engines(), ", "))
	}
	if err := prepare(dir); err != nil {
		return nil, err
	}
	s := &Scenario{Dir: dir, Config: filepath.Join(dir, "refill.yaml"), Today: today.UTC().Truncate(24 * time.Hour), Engine: engine, Warehouse: "warehouse.db"}
	if engine == "duckdb" {
		s.Warehouse = "warehouse.duckdb"
	}
	s.BrokenFrom, s.BrokenTo = s.Day(9), s.Day(7)
	if err := s.writeWarehouse(ctx); err != nil {
		return nil, fmt.Errorf("demo warehouse: %w", err)
	}
	cfg := configYAML
	if engine == "duckdb" {
		cfg = duckDBConfig(cfg)
	}
	if err := os.WriteFile(s.Config, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	schema, err := config.Schema()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "refill.schema.json"), append(schema, '\n'), 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("demo config schema: %w", err)
	}
	if engine == "duckdb" {
		return s, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "export.sh"), []byte(exportScript), 0o755); err != nil {
		return nil, fmt.Errorf("demo export script: %w", err)
	}
	if err := writeScratch(ctx, filepath.Join(dir, "scratch.db")); err != nil {
		return nil, fmt.Errorf("demo proof warehouse: %w", err)
	}
	return s, nil
}

func prepare(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("demo directory: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "refill.yaml"))
	if err != nil || !strings.HasPrefix(strings.TrimPrefix(string(b), schemaLine), marker) {
		return refill.BadInputf("%s is not empty and holds no earlier demo: choose another directory (refill demo DIR)", dir)
	}
	for _, name := range []string{"warehouse.db", "warehouse.db-wal", "warehouse.db-shm", "warehouse.duckdb", "warehouse.duckdb.wal", "scratch.db", "export.sh", ".refill", "exports", "refill.schema.json"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("demo directory: %w", err)
		}
	}
	return nil
}

var eventTypes = []string{"view", "click", "cart", "purchase", "refund"}

func (s *Scenario) writeWarehouse(ctx context.Context) error {
	db, done, err := s.open()
	if err != nil {
		return err
	}
	defer done()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, ddl := range schema {
		if s.Engine == "duckdb" {
			// DuckDB's REAL is 4 bytes; SQLite's is 8.
			ddl = strings.ReplaceAll(ddl, " REAL", " DOUBLE")
		}
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("%s: %w", ddl, err)
		}
	}
	// Rows go in by the few hundred per statement: one statement per row
	// costs DuckDB a millisecond each.
	var redo, events batch
	redo.stmt = `INSERT INTO upstream_redelivery (event_id, amount) VALUES `
	events.stmt = `INSERT INTO events_raw (event_id, event_date, event_time, ingested_at, user_id, event_type, amount) VALUES `
	rng := rand.New(rand.NewPCG(42, 2026))
	id := 0
	for n := Days; n >= 1; n-- {
		day := s.Today.AddDate(0, 0, -n)
		broken := n >= 7 && n <= 9
		// Weekly seasonality: weekends carry 40% of a weekday's traffic,
		// with ±10% noise, so the gate has something real to model.
		base := 500.0
		if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			base = 200
		}
		count := int(base * (0.9 + 0.2*rng.Float64()))
		for i := 0; i < count; i++ {
			t := day.Add(time.Duration(rng.IntN(86400)) * time.Second)
			ing := t.Add(time.Duration(30+rng.IntN(600)) * time.Second)
			typ := eventTypes[weighted(rng)]
			var amount any = 0.0
			switch typ {
			case "purchase":
				amount = float64(500+rng.IntN(9500)) / 100
			case "refund":
				amount = -float64(500+rng.IntN(4500)) / 100
			}
			if n == RemappedAgo {
				// A tracking release shipped for one day mapped every
				// event type to 'unknown': the gate's drift check sees
				// event_type's top value share jump to 100%.
				typ = "unknown"
			}
			if broken {
				// The upstream renamed amount to amount_cents: the column
				// the pipeline reads arrived empty for 72 hours. The
				// upstream's corrected re-delivery waits in a side table
				// until the demo "repairs" the source.
				if err := redo.add(ctx, tx, id+1, amount); err != nil {
					return err
				}
				amount = nil
			}
			id++
			if err := events.add(ctx, tx, id, day.Format("2006-01-02"), t.Format("2006-01-02 15:04:05"),
				ing.Format("2006-01-02 15:04:05"), 1+rng.IntN(400), typ, amount); err != nil {
				return err
			}
		}
	}
	for _, b := range []*batch{&redo, &events} {
		if err := b.flush(ctx, tx); err != nil {
			return err
		}
	}
	s.Rows = id
	// Build the derived tables the way the pipeline did, day by day. On the
	// broken days the aggregation mis-grouped everything into one 'unknown'
	// row — the wrong data that then fed billing and the partner export.
	for n := Days; n >= 1; n-- {
		day := s.Day(n)
		stmts := []string{
			`INSERT INTO sessions (day, user_id, events, first_seen, last_seen) SELECT event_date, user_id, count(*), min(event_time), max(event_time) FROM events_raw WHERE event_date = ? GROUP BY event_date, user_id`,
			`INSERT INTO events_daily (day, event_type, events, amount) SELECT event_date, event_type, count(*), coalesce(sum(amount), 0) FROM events_raw WHERE event_date = ? GROUP BY event_date, event_type`,
		}
		if n >= 7 && n <= 9 {
			stmts[1] = `INSERT INTO events_daily (day, event_type, events, amount) SELECT event_date, 'unknown', count(*), 0 FROM events_raw WHERE event_date = ? GROUP BY event_date`
		}
		revenue := `INSERT INTO revenue_daily (day, amount) SELECT day, sum(amount) FROM events_daily WHERE day = ? GROUP BY day`
		if n <= 3 {
			// Billing ran before the last days' late events arrived: these
			// rows are stale, and an INSERT OR IGNORE can never fix them.
			revenue = `INSERT INTO revenue_daily (day, amount) SELECT day, round(0.9 * sum(amount), 2) FROM events_daily WHERE day = ? GROUP BY day`
		}
		stmts = append(stmts, revenue,
			`INSERT INTO partner_feed (day, rows_exported) SELECT day, sum(events) FROM events_daily WHERE day = ? GROUP BY day`,
		)
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q, day); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
	}
	return tx.Commit()
}

// batch collects rows for one multi-row INSERT.
type batch struct {
	stmt string
	rows int
	vals []string
	args []any
}

func (b *batch) add(ctx context.Context, tx *sql.Tx, row ...any) error {
	marks := make([]string, len(row))
	for i := range row {
		marks[i] = fmt.Sprintf("$%d", len(b.args)+i+1)
	}
	b.vals = append(b.vals, "("+strings.Join(marks, ", ")+")")
	b.args = append(b.args, row...)
	if b.rows++; b.rows == 400 {
		return b.flush(ctx, tx)
	}
	return nil
}

func (b *batch) flush(ctx context.Context, tx *sql.Tx) error {
	if b.rows == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, b.stmt+strings.Join(b.vals, ", "), b.args...); err != nil {
		return err
	}
	b.rows, b.vals, b.args = 0, b.vals[:0], b.args[:0]
	return nil
}

// weighted picks an event type: mostly views and clicks, few refunds.
func weighted(rng *rand.Rand) int {
	r := rng.IntN(100)
	switch {
	case r < 55:
		return 0
	case r < 80:
		return 1
	case r < 92:
		return 2
	case r < 98:
		return 3
	default:
		return 4
	}
}

var schema = []string{
	`CREATE TABLE events_raw (event_id INTEGER PRIMARY KEY, event_date TEXT NOT NULL, event_time TEXT, ingested_at TEXT, user_id INTEGER, event_type TEXT, amount REAL)`,
	`CREATE INDEX events_raw_date ON events_raw (event_date)`,
	`CREATE TABLE sessions (day TEXT NOT NULL, user_id INTEGER NOT NULL, events INTEGER NOT NULL, first_seen TEXT, last_seen TEXT)`,
	`CREATE INDEX sessions_day ON sessions (day)`,
	`CREATE TABLE events_daily (day TEXT NOT NULL, event_type TEXT NOT NULL, events INTEGER NOT NULL, amount REAL NOT NULL)`,
	`CREATE INDEX events_daily_day ON events_daily (day)`,
	`CREATE TABLE revenue_daily (day TEXT PRIMARY KEY, amount REAL NOT NULL)`,
	`CREATE TABLE partner_feed (day TEXT PRIMARY KEY, rows_exported INTEGER NOT NULL)`,
	`CREATE TABLE upstream_redelivery (event_id INTEGER PRIMARY KEY, amount REAL)`,
}

// writeScratch creates the proof warehouse: the same tables, no data.
// Command jobs are proven there, never against the real warehouse.
func writeScratch(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	for _, ddl := range schema {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// FixBillingJob rewrites revenue_daily's job in the demo's refill.yaml from
// INSERT OR IGNORE, which can never repair a stale row, to a DELETE and
// INSERT that replaces the partition — what the team does after the proof
// and the report both showed billing was not repaired.
func (s *Scenario) FixBillingJob() error {
	b, err := os.ReadFile(s.Config)
	if err != nil {
		return err
	}
	fixed := strings.Replace(string(b), `        INSERT OR IGNORE INTO revenue_daily (day, amount)
        SELECT day, sum(amount) FROM events_daily WHERE day = :partition GROUP BY day`,
		`        DELETE FROM revenue_daily WHERE day = :partition;
        INSERT INTO revenue_daily (day, amount)
        SELECT day, sum(amount) FROM events_daily WHERE day = :partition GROUP BY day`, 1)
	if fixed == string(b) {
		return fmt.Errorf("demo: revenue_daily's job is not the one the demo wrote")
	}
	return os.WriteFile(s.Config, []byte(fixed), 0o644)
}

// Repair loads the upstream's corrected re-delivery of the broken 72 hours
// into events_raw, as the source team would once they fix their export.
func (s *Scenario) Repair(ctx context.Context) (int64, error) {
	db, done, err := s.open()
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := db.ExecContext(ctx, `UPDATE events_raw SET amount = (SELECT r.amount FROM upstream_redelivery r WHERE r.event_id = events_raw.event_id)
		WHERE event_id IN (SELECT event_id FROM upstream_redelivery)`)
	if err != nil {
		return 0, fmt.Errorf("repairing events_raw: %w", err)
	}
	return res.RowsAffected()
}

// MissDay deletes one day of events_daily, as a load that never ran
// would leave it: the gap the watcher finds.
func (s *Scenario) MissDay(ctx context.Context, day string) (int64, error) {
	db, done, err := s.open()
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := db.ExecContext(ctx, `DELETE FROM events_daily WHERE day = ?`, day)
	if err != nil {
		return 0, fmt.Errorf("events_daily %s: %w", day, err)
	}
	return res.RowsAffected()
}

// exportScript is the partner export: it writes one file per day for the
// partner to collect and records the delivery in partner_feed of the
// warehouse refill names in REFILL_WAREHOUSE (the proof warehouse during a
// proof). It replaces the day's row, so reruns are safe.
const exportScript = `#!/bin/sh
set -eu
day="$1"
db="${REFILL_WAREHOUSE#sqlite:}"
mkdir -p exports
sqlite3 -cmd ".timeout 10000" "$db" "SELECT day, event_type, events, amount FROM events_daily WHERE day = '$day'" > "exports/partner-$day.csv" 2>/dev/null || : > "exports/partner-$day.csv"
rows=$(wc -l < "exports/partner-$day.csv")
sqlite3 -cmd ".timeout 10000" "$db" "DELETE FROM partner_feed WHERE day = '$day'; INSERT INTO partner_feed (day, rows_exported) VALUES ('$day', $rows);"
`

// duckDBConfig is the demo's config for its DuckDB warehouse: the same
// datasets, with the partner export a query job.
func duckDBConfig(cfg string) string {
	for old, new := range map[string]string{
		"warehouse: sqlite:warehouse.db\n":     "warehouse: duckdb:warehouse.duckdb\n",
		"proof_warehouse: sqlite:scratch.db\n": "",
		`    job:
      command: ["./export.sh", "{{partition}}"]
`: `    # On SQLite this is a command job that writes the partner's file with
    # sqlite3; here the export records what it would deliver.
    job:
      query: |
        SELECT day, sum(events) AS rows_exported
        FROM events_daily WHERE day = :partition GROUP BY day
`,
	} {
		if !strings.Contains(cfg, old) {
			panic("demo: the DuckDB config no longer finds " + old)
		}
		cfg = strings.Replace(cfg, old, new, 1)
	}
	return cfg
}

const configYAML = schemaLine + marker + `: the incident refill exists for, replayed.
# An upstream schema change left events_raw.amount empty for 72 hours; the
# aggregate built on it was wrong, and so were billing and the partner export.
version: 1
warehouse: sqlite:warehouse.db
state: sqlite:.refill/state.db
proof_warehouse: sqlite:scratch.db
run: {max_active: 3, max_active_total: 8, attempts: 3}
policy:
  auto_max_days: 7
  manual_over_days: 30
  manual_tags: [billing, external]
  aggregate_tags: [aggregate]
  rules:
    - name: watcher-small-only
      when: "request.requested_by == 'watcher' && request.days > 3"
      tier: manual
      reason: the watcher may fill at most 3 days on its own
users:
  alice: {roles: [engineer]}
  bob: {roles: [engineer]}
  carol: {roles: [lead]}
datasets:
  events_raw:
    table: events_raw
    partition: {column: event_date, grain: day}
    checks:
      not_null: {columns: [user_id, amount], max_ratio: 0.01}
      volume: {lookback: 28, max_z: 3}
      time_order: [{earlier: event_time, later: ingested_at}]
      no_future: [event_time]
      unique: [event_id]
      accepted_values: {event_type: [view, click, cart, purchase, refund, unknown]}
      drift: {columns: [amount, event_type, user_id], lookback: 28, max_z: 4}
  sessions:
    table: sessions
    partition: {column: day}
    upstream: [events_raw]
    key: [user_id]
    job:
      query: |
        SELECT event_date AS day, user_id, count(*) AS events,
               min(event_time) AS first_seen, max(event_time) AS last_seen
        FROM events_raw WHERE event_date = :partition
        GROUP BY event_date, user_id
  events_daily:
    table: events_daily
    partition: {column: day}
    upstream: [events_raw]
    tags: [aggregate]
    schedule: {every: day, lag: 2h, horizon: 35}
    key: [event_type]
    job:
      query: |
        SELECT event_date AS day, event_type, count(*) AS events,
               coalesce(sum(amount), 0) AS amount
        FROM events_raw WHERE event_date = :partition
        GROUP BY event_date, event_type
  revenue_daily:
    table: revenue_daily
    partition: {column: day}
    upstream: [events_daily]
    tags: [aggregate, billing]
    key: [day]
    job:
      sql: |
        INSERT OR IGNORE INTO revenue_daily (day, amount)
        SELECT day, sum(amount) FROM events_daily WHERE day = :partition GROUP BY day
  partner_feed:
    table: partner_feed
    partition: {column: day}
    upstream: [events_daily]
    tags: [external]
    job:
      command: ["./export.sh", "{{partition}}"]
`
