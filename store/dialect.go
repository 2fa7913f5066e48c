package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dialect is everything that differs between the SQL engines the state store
// runs on. Following goose, the store's statements are written once, with ?
// placeholders and types both engines accept, and the dialect adapts them, so
// no method of Store asks which driver it is talking to.
type dialect struct {
	// name is what Store.Driver reports and the directory under migrations/
	// holding this engine's schema.
	name string
	// numbered is true when the engine wants $1, $2, … rather than ?.
	numbered bool
	// lockMigrations, when set, runs first in the migration transaction so
	// that processes opening one database at the same moment apply each
	// migration exactly once. SQLite needs none: its write transactions
	// begin IMMEDIATE and so already hold the database's only write lock.
	lockMigrations string
	// createMigrations creates the table that records applied migrations. It
	// lives here rather than in a migration because it is what migrations
	// are recorded in.
	createMigrations string
	// timestamp converts a time to the value bound for a timestamp column.
	timestamp func(time.Time) any
	// boolean converts a bool for a boolean column (SQLite has none).
	boolean func(bool) any
	// lockAudit, when set, runs first in every write transaction so that
	// appends to the audit chain from several processes take turns. SQLite
	// needs none: an IMMEDIATE transaction already holds the only write lock.
	lockAudit string
	// lockSlots, when set, runs first in a transaction that takes a
	// dataset's slot (?: the dataset), so that takers of one dataset's
	// slots take turns without waiting on the audit chain's lock. SQLite
	// needs none, as for lockAudit.
	lockSlots string
	// shareRow, when set, ends a SELECT of one row so that the row is
	// locked against updates until the transaction ends. SQLite needs none:
	// an IMMEDIATE transaction already holds the only write lock.
	shareRow string
}

// sqliteTime is the text form of timestamps on SQLite. SQLite has no time
// type and compares text byte by byte, so the form is fixed-width UTC with
// all nine fractional digits: RFC3339Nano trims trailing zeros, and then
// "…:05Z" would sort after "…:05.5Z".
const sqliteTime = "2006-01-02T15:04:05.000000000Z07:00"

var sqliteDialect = dialect{
	name: "sqlite",
	createMigrations: `CREATE TABLE IF NOT EXISTS refill_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT`,
	timestamp: func(t time.Time) any { return t.UTC().Format(sqliteTime) },
	boolean: func(b bool) any {
		if b {
			return 1
		}
		return 0
	},
}

var postgresDialect = dialect{
	name:     "postgres",
	numbered: true,
	// The lock is keyed by the schema as well, so that stores in different
	// schemas of one database (as the tests use) do not wait for each other.
	lockMigrations: `SELECT pg_advisory_xact_lock(hashtext('refill_migrations'), hashtext(coalesce(current_schema(), '')))`,
	createMigrations: `CREATE TABLE IF NOT EXISTS refill_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`,
	timestamp: func(t time.Time) any { return t.UTC() },
	boolean:   func(b bool) any { return b },
	lockAudit: `SELECT pg_advisory_xact_lock(hashtext('refill_audit'), hashtext(coalesce(current_schema(), '')))`,
	lockSlots: `SELECT pg_advisory_xact_lock(hashtext('refill_slots:' || coalesce(current_schema(), '')), hashtext(?))`,
	shareRow:  ` FOR SHARE`,
}

// rebind rewrites the ? placeholders of query for the dialect. Question
// marks inside single-quoted literals are left alone, though the store's own
// statements bind every value and so have none.
func (d dialect) rebind(query string) string {
	if !d.numbered {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// timestamp reads a timestamp column from either engine: PostgreSQL's driver
// returns time.Time, SQLite returns the text written by sqliteDialect.
type timestamp struct{ time.Time }

// Scan implements sql.Scanner.
func (ts *timestamp) Scan(v any) error {
	var err error
	switch v := v.(type) {
	case time.Time:
		ts.Time = v.UTC()
	case string:
		ts.Time, err = time.Parse(time.RFC3339Nano, v)
	case []byte:
		ts.Time, err = time.Parse(time.RFC3339Nano, string(v))
	default:
		return fmt.Errorf("timestamp column holds %T, want a time or RFC 3339 text", v)
	}
	return err
}
