package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Job text runs under guards kept by the SQLite engine itself, so that it
// is SQLite, reading the text exactly as it will run it, that stops a job
// from ending refill's transaction or writing where it may not, not
// refill's lexer guessing where statements end (a guess that "SELECT temp
// trigger, 1 AS begin ...; COMMIT; ..." once fooled):
//
//   - An authorizer, which SQLite asks about every operation while it
//     compiles a statement, each statement of a multi-statement text and
//     each trigger the statement fires included. It refuses transaction
//     control, ATTACH and DETACH, PRAGMAs, virtual tables and
//     load_extension; any change to the schema (CREATE, DROP and ALTER of
//     tables, indexes, triggers and views, temporary ones included,
//     REINDEX, ANALYZE), since what a job creates would outlive it, fire
//     later, or differ between the builds of a proof; reading refill's own
//     tables (refill_*), so that a job cannot tell a proof from a real
//     apply; for an sql job, a write to any table but its own; for a query
//     job, anything but reading. It is installed only while job text runs,
//     so refill's own BEGIN, COMMIT, SAVEPOINT and catalogue reads go
//     through untouched.
//   - For an sql job, temporary triggers on its own table that abort any
//     statement inserting, updating or deleting a row outside the
//     partition being built (partition.go).
//   - Transaction hooks, installed for the whole of refill's transaction: a
//     commit hook that turns every commit but refill's own into a rollback,
//     and a rollback hook that notices when the transaction ends early (a
//     conflict clause such as INSERT OR ROLLBACK ends it without any
//     transaction statement). Once it has ended, the transaction refuses
//     all further work, so nothing can go on in autocommit mode.

// policy is what job text may do.
type policy int

const (
	// sqlJob may read the warehouse's tables, but for refill's own, and
	// write its own table; it may not control the transaction, attach or
	// detach databases, run PRAGMAs, change the schema or load extensions.
	sqlJob policy = iota
	// queryJob may only read, and let refill's INSERT into the guard's
	// table (if it has one) take the rows.
	queryJob
)

// guard is the authorizer of one stretch of job text. SQLite calls it on
// the goroutine that runs the statement, so it needs no lock.
type guard struct {
	policy policy
	// name is the table the job builds, for messages ("" for none).
	name string
	// schema and table name the one table the job may write: a query
	// job's target, which refill's INSERT fills, or an sql job's own table
	// (table "" for none; schema "" for any schema).
	schema, table string
	// refused says what the job tried, and rule the rule it broke ("" for
	// the transaction's), set when the callback denies.
	refused, rule string
}

// newQueryGuard is the guard of a query job whose rows refill inserts into
// table ("" when they go nowhere, as when they are only counted).
func newQueryGuard(table string) *guard {
	g := &guard{policy: queryJob, name: table}
	if table != "" {
		g.schema, g.table = splitTable(table)
	}
	return g
}

// newSQLGuard is the guard of an sql job that builds table, which is the
// one table it may write: in the main database unless table names another.
func newSQLGuard(table string) *guard {
	g := &guard{policy: sqlJob, name: table}
	g.schema, g.table = splitTable(table)
	if g.schema == "" {
		g.schema = "main"
	}
	return g
}

// owns reports whether the table name in database db is the guard's own.
func (g *guard) owns(db, name string) bool {
	return g.table != "" && sqltext.SQLite.SameName(name, g.table) && (g.schema == "" || sqltext.SQLite.SameName(db, g.schema))
}

// refillTable reports whether name is one of refill's own tables
// (refill_published, refill_audit_anchor, snapshots), which all start
// with refill_.
func refillTable(name string) bool {
	return len(name) >= len("refill_") && strings.EqualFold(name[:len("refill_")], "refill_")
}

// tempSchemaTable reports whether name, in database db, is the temp
// database's schema table.
func tempSchemaTable(name, db string) bool {
	switch strings.ToLower(name) {
	case "sqlite_temp_master", "sqlite_temp_schema":
		return true
	case "sqlite_master", "sqlite_schema":
		return strings.EqualFold(db, "temp")
	}
	return false
}

// rawPages reports whether name is one of SQLite's views of raw database
// pages, which read every table, refill's included, as bytes.
func rawPages(name string) bool {
	switch strings.ToLower(name) {
	case "sqlite_dbpage", "dbstat":
		return true
	}
	return false
}

// schemaTable reports whether name is SQLite's schema table, which every
// CREATE and DROP writes.
func schemaTable(name string) bool {
	switch strings.ToLower(name) {
	case "sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema":
		return true
	}
	return false
}

func (g *guard) authorize(action msqlite.AuthorizerActionCode, arg1, arg2, db, trigger string) msqlite.AuthorizerReturnCode {
	deny := func(rule, format string, args ...any) msqlite.AuthorizerReturnCode {
		if g.refused == "" {
			g.refused, g.rule = fmt.Sprintf(format, args...), rule
		}
		return msqlite.AuthorizerDeny
	}
	switch action {
	case msqlite.AuthTransaction:
		return deny("", "control the transaction (%s)", arg1)
	case msqlite.AuthSavepoint:
		op := arg1
		if op == "BEGIN" {
			op = "SAVEPOINT"
		}
		return deny("", "control the transaction (%s %s)", op, arg2)
	case msqlite.AuthAttach:
		return deny("", "attach a database (%s)", arg1)
	case msqlite.AuthDetach:
		return deny("", "detach a database (%s)", arg1)
	case msqlite.AuthPragma:
		return deny("", "run a PRAGMA (%s)", arg1)
	case msqlite.AuthCreateVTable, msqlite.AuthDropVTable:
		return deny("", "create or drop a virtual table (%s using %s)", arg1, arg2)
	case msqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return deny("", "load an extension")
		}
		return msqlite.AuthorizerOK
	case msqlite.AuthRead:
		if refillTable(arg1) {
			return deny(sqltext.RuleOwnTables, "read refill's own table %s", arg1)
		}
		// What lists or holds refill's objects whatever their names: the
		// temp schema (refill's fence and copies), and the raw pages and
		// page statistics of any database (refill's marks among them).
		if tempSchemaTable(arg1, db) || rawPages(arg1) {
			return deny(sqltext.RuleOwnTables, "read %s, which shows refill's own tables", arg1)
		}
		return msqlite.AuthorizerOK
	case msqlite.AuthSelect, msqlite.AuthRecursive:
		return msqlite.AuthorizerOK
	case msqlite.AuthInsert, msqlite.AuthUpdate, msqlite.AuthDelete:
		switch {
		case schemaTable(arg1):
			// CREATE and DROP write the schema table before (or after)
			// SQLite asks about the object itself.
			return deny(sqltext.RuleSchema, "change the warehouse's schema (a CREATE or DROP, which writes %s)", arg1)
		case refillTable(arg1):
			return deny(sqltext.RuleOwnTables, "write refill's own table %s", arg1)
		case g.owns(db, arg1) && (g.policy == sqlJob || action == msqlite.AuthInsert):
			return msqlite.AuthorizerOK
		case g.policy == sqlJob:
			// Triggers included: a trigger the job's writes fire that
			// writes elsewhere writes elsewhere all the same.
			return deny(sqltext.RuleOwnTable, "write table %s", arg1)
		case trigger != "":
			// A trigger the warehouse's owner defined on a query job's
			// target table: what it does is not the query's doing.
			return msqlite.AuthorizerOK
		}
		return deny(sqltext.RuleQueryJob, "write to the warehouse (%s)", describe(action, arg1, arg2))
	}
	if ddl[action] {
		return deny(sqltext.RuleSchema, "change the warehouse's schema (%s)", describe(action, arg1, arg2))
	}
	return deny("", "%s", describe(action, arg1, arg2))
}

// ddl holds the actions that change the schema.
var ddl = map[msqlite.AuthorizerActionCode]bool{
	msqlite.AuthCreateIndex: true, msqlite.AuthCreateTable: true, msqlite.AuthCreateTrigger: true, msqlite.AuthCreateView: true,
	msqlite.AuthCreateTempIndex: true, msqlite.AuthCreateTempTable: true, msqlite.AuthCreateTempTrigger: true, msqlite.AuthCreateTempView: true,
	msqlite.AuthDropIndex: true, msqlite.AuthDropTable: true, msqlite.AuthDropTrigger: true, msqlite.AuthDropView: true,
	msqlite.AuthDropTempIndex: true, msqlite.AuthDropTempTable: true, msqlite.AuthDropTempTrigger: true, msqlite.AuthDropTempView: true,
	msqlite.AuthAlterTable: true, msqlite.AuthReindex: true, msqlite.AuthAnalyze: true,
}

// describe names an operation for a refusal.
func describe(action msqlite.AuthorizerActionCode, arg1, arg2 string) string {
	names := map[msqlite.AuthorizerActionCode]string{
		msqlite.AuthInsert: "INSERT INTO", msqlite.AuthUpdate: "UPDATE", msqlite.AuthDelete: "DELETE FROM",
		msqlite.AuthCreateTable: "CREATE TABLE", msqlite.AuthCreateTempTable: "CREATE TEMP TABLE",
		msqlite.AuthDropTable: "DROP TABLE", msqlite.AuthDropTempTable: "DROP TABLE",
		msqlite.AuthCreateIndex: "CREATE INDEX", msqlite.AuthCreateTempIndex: "CREATE INDEX",
		msqlite.AuthDropIndex: "DROP INDEX", msqlite.AuthDropTempIndex: "DROP INDEX",
		msqlite.AuthCreateView: "CREATE VIEW", msqlite.AuthCreateTempView: "CREATE TEMP VIEW",
		msqlite.AuthDropView: "DROP VIEW", msqlite.AuthDropTempView: "DROP VIEW",
		msqlite.AuthCreateTrigger: "CREATE TRIGGER", msqlite.AuthCreateTempTrigger: "CREATE TEMP TRIGGER",
		msqlite.AuthDropTrigger: "DROP TRIGGER", msqlite.AuthDropTempTrigger: "DROP TRIGGER",
		msqlite.AuthReindex: "REINDEX", msqlite.AuthAnalyze: "ANALYZE",
	}
	if action == msqlite.AuthAlterTable {
		return "ALTER TABLE " + arg2 // arg1 is the database
	}
	if n, ok := names[action]; ok {
		return n + " " + arg1
	}
	return fmt.Sprintf("operation %d on %s", action, arg1)
}

// guarded runs fn, which runs job text on conn, under g, and removes g
// afterwards. If g refused something, the error says so as a
// *sqltext.RefusedError. tainted reports a connection that must not be
// used again: g could not be removed.
func guarded(conn *sql.Conn, g *guard, partition string, fn func() error) (tainted bool, err error) {
	if err := setAuthorizer(conn, g.authorize); err != nil {
		return true, fmt.Errorf("job guard: %w", err)
	}
	err = fn()
	if rerr := setAuthorizer(conn, nil); rerr != nil {
		tainted = true
		err = errors.Join(err, fmt.Errorf("job guard: %w", rerr))
	}
	return tainted, g.refusal(err, partition)
}

// refusal is err as a *sqltext.RefusedError when g refused what failed.
func (g *guard) refusal(err error, partition string) error {
	if err != nil && g.refused != "" && code(err) == sqlite3.SQLITE_AUTH {
		stmt := ""
		if se := (*sqltext.StatementError)(nil); errors.As(err, &se) {
			stmt = se.SQL
		}
		err = &sqltext.RefusedError{Partition: partition, Table: g.name, SQL: stmt, What: g.refused, Rule: g.rule, Err: err}
	}
	return err
}

// setAuthorizer installs fn on conn's SQLite connection (nil removes it).
func setAuthorizer(conn *sql.Conn, fn msqlite.AuthorizerFn) error {
	return conn.Raw(func(dc any) error {
		r, ok := dc.(msqlite.AuthorizerRegisterer)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) cannot install an authorizer", dc)
		}
		return r.RegisterAuthorizer(fn)
	})
}

// hooker is the part of modernc's connection that takes transaction hooks.
type hooker interface {
	RegisterCommitHook(msqlite.CommitHookFn)
	RegisterRollbackHook(msqlite.RollbackHookFn)
}

// hook installs t's transaction hooks on its connection: from now on only
// refill's own commit (t.committing) goes through, and a rollback marks t ended.
func (t *tx) hook() error {
	return t.conn.Raw(func(dc any) error {
		h, ok := dc.(hooker)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) cannot install transaction hooks", dc)
		}
		h.RegisterCommitHook(func() int32 {
			if t.committing {
				return 0
			}
			t.end("a COMMIT")
			return 1 // SQLite rolls back instead
		})
		h.RegisterRollbackHook(func() { t.end("a ROLLBACK, or a conflict clause such as INSERT OR ROLLBACK") })
		return nil
	})
}

// unhook removes t's transaction hooks, before its connection serves
// other work.
func (t *tx) unhook() error {
	return t.conn.Raw(func(dc any) error {
		h, ok := dc.(hooker)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) cannot remove transaction hooks", dc)
		}
		h.RegisterCommitHook(nil)
		h.RegisterRollbackHook(nil)
		return nil
	})
}

// errEnded is every call on a transaction that ended before refill ended
// it: what ran since would not have been part of it.
var errEnded = errors.New("the warehouse transaction was ended early (by a job's ROLLBACK, or by a conflict clause such as INSERT OR ROLLBACK) and refuses further work; nothing of it was committed")

// errFailed is every call on a transaction in which job text failed: as on
// PostgreSQL, where a failed statement aborts the transaction, only the
// rollback is left, so that a caller that missed the error cannot commit
// half a job.
var errFailed = errors.New("the warehouse transaction refuses further work: a job failed in it, so only a rollback is left")

// usable returns an error once t's transaction has ended early or job text
// has failed in it.
func (t *tx) usable() error {
	switch {
	case t.ended:
		return errEnded
	case t.failed:
		return errFailed
	}
	return nil
}

// fail marks t failed when job text returned err.
func (t *tx) fail(err error) {
	if err != nil {
		t.failed = true
	}
}

// jobText runs fn, which runs job text, in t's transaction under g. A
// connection the job tainted is discarded when the transaction ends.
//
// A transaction's authorizer is installed once, at its first job, and
// stays until the transaction ends (unguard), asking t.guard, which is g
// only while fn runs and lets everything through otherwise: SQLite asks
// the authorizer while it compiles a statement, so refill's own
// statements, compiled outside fn, are not the job's, and installing an
// authorizer makes SQLite parse every prepared statement again, which
// per partition would be most of what a plan of small partitions costs.
func (t *tx) jobText(ctx context.Context, g *guard, partition string, fn func() error) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !t.authorizing {
		if err := setAuthorizer(t.conn, t.authorize); err != nil {
			t.tainted = true
			return fmt.Errorf("job guard: %w", err)
		}
		t.authorizing = true
	}
	t.guard = g
	err := fn()
	t.guard = nil
	err = g.refusal(err, partition)
	if t.ended {
		// A conflict clause (INSERT OR ROLLBACK) ends the transaction
		// without a transaction statement for the guard to refuse.
		err = &sqltext.RefusedError{Partition: partition, Table: g.name, What: "end the transaction (by " + t.endedBy + ")", Err: errors.Join(err, errEnded)}
	}
	return err
}

// authorize is the transaction's authorizer: the guard of the job text
// that is running, if any. The partition triggers (partition.go) read
// the fence table, which is refill's own, under it.
func (t *tx) authorize(action msqlite.AuthorizerActionCode, arg1, arg2, db, trigger string) msqlite.AuthorizerReturnCode {
	g := t.guard
	if g == nil {
		return msqlite.AuthorizerOK
	}
	if action == msqlite.AuthRead && strings.EqualFold(arg1, fenceTable) && strings.EqualFold(db, "temp") && t.fences.triggers[trigger] {
		return msqlite.AuthorizerOK
	}
	return g.authorize(action, arg1, arg2, db, trigger)
}

// unguard removes the transaction's authorizer, once it has ended.
func (t *tx) unguard() error {
	if !t.authorizing {
		return nil
	}
	if err := setAuthorizer(t.conn, nil); err != nil {
		t.tainted = true
		return fmt.Errorf("job guard: %w", err)
	}
	t.authorizing = false
	return nil
}

// end marks t's transaction ended early, by how.
func (t *tx) end(how string) {
	if !t.ended {
		t.ended, t.endedBy = true, how
	}
}
