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

// Job text runs under two guards, both kept by the SQLite engine itself, so
// that it is SQLite, reading the text exactly as it will run it, that stops
// a job from ending refill's transaction, not refill's lexer guessing where
// statements end (a guess that "SELECT temp trigger, 1 AS begin ...;
// COMMIT; ..." once fooled):
//
//   - An authorizer, which SQLite asks about every operation while it
//     compiles a statement, each statement of a multi-statement text
//     included. It refuses transaction control, ATTACH and DETACH, PRAGMAs,
//     virtual tables and load_extension; for a query job, anything but
//     reading. It is installed only while job text runs, so refill's own
//     BEGIN, COMMIT, SAVEPOINT and catalogue reads go through untouched.
//   - Transaction hooks, installed for the whole of refill's transaction: a
//     commit hook that turns every commit but refill's own into a rollback,
//     and a rollback hook that notices when the transaction ends early (a
//     conflict clause such as INSERT OR ROLLBACK ends it without any
//     transaction statement). Once it has ended, the transaction refuses
//     all further work, so nothing can go on in autocommit mode.

// policy is what job text may do.
type policy int

const (
	// sqlJob may read and write the warehouse's tables, but not control
	// the transaction, attach or detach databases, run PRAGMAs, create
	// virtual tables or load extensions.
	sqlJob policy = iota
	// queryJob may only read, and let refill's INSERT into the guard's
	// target table (if it has one) take the rows.
	queryJob
)

// guard is the authorizer of one stretch of job text. SQLite calls it on
// the goroutine that runs the statement, so it needs no lock.
type guard struct {
	policy policy
	// targetSchema and target name the table a query job's rows go into
	// (target "" for none; targetSchema "" for any schema).
	targetSchema, target string
	// refused says what the job tried, set when the callback denies.
	refused string
	// temp is set when the job created a temporary object, which would
	// outlive the transaction on the connection: the connection must then
	// not go back to the pool.
	temp bool
}

func newQueryGuard(table string) *guard {
	g := &guard{policy: queryJob, target: table}
	if schema, name, ok := strings.Cut(table, "."); ok {
		g.targetSchema, g.target = schema, name
	}
	return g
}

func (g *guard) authorize(action msqlite.AuthorizerActionCode, arg1, arg2, db, trigger string) msqlite.AuthorizerReturnCode {
	deny := func(format string, args ...any) msqlite.AuthorizerReturnCode {
		if g.refused == "" {
			g.refused = fmt.Sprintf(format, args...)
		}
		return msqlite.AuthorizerDeny
	}
	switch action {
	case msqlite.AuthTransaction:
		return deny("control the transaction (%s)", arg1)
	case msqlite.AuthSavepoint:
		op := arg1
		if op == "BEGIN" {
			op = "SAVEPOINT"
		}
		return deny("control the transaction (%s %s)", op, arg2)
	case msqlite.AuthAttach:
		return deny("attach a database (%s)", arg1)
	case msqlite.AuthDetach:
		return deny("detach a database (%s)", arg1)
	case msqlite.AuthPragma:
		return deny("run a PRAGMA (%s)", arg1)
	case msqlite.AuthCreateVTable, msqlite.AuthDropVTable:
		return deny("create or drop a virtual table (%s using %s)", arg1, arg2)
	case msqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return deny("load an extension")
		}
	}
	if g.policy == sqlJob {
		switch action {
		case msqlite.AuthCreateTempTable, msqlite.AuthCreateTempIndex, msqlite.AuthCreateTempTrigger, msqlite.AuthCreateTempView:
			g.temp = true
		}
		return msqlite.AuthorizerOK
	}
	switch action {
	case msqlite.AuthSelect, msqlite.AuthRead, msqlite.AuthFunction, msqlite.AuthRecursive:
		return msqlite.AuthorizerOK
	case msqlite.AuthInsert:
		if g.target != "" && strings.EqualFold(arg1, g.target) && (g.targetSchema == "" || strings.EqualFold(db, g.targetSchema)) {
			return msqlite.AuthorizerOK
		}
	}
	if trigger != "" && action != msqlite.AuthCreateTempTrigger && action != msqlite.AuthCreateTrigger {
		// A trigger the warehouse's owner defined on the target table:
		// what it does is not the query's doing.
		return msqlite.AuthorizerOK
	}
	return deny("write to the warehouse (%s): a query job only reads, and refill writes its rows", describe(action, arg1))
}

// describe names an operation for a refusal.
func describe(action msqlite.AuthorizerActionCode, arg string) string {
	names := map[msqlite.AuthorizerActionCode]string{
		msqlite.AuthInsert: "INSERT INTO", msqlite.AuthUpdate: "UPDATE", msqlite.AuthDelete: "DELETE FROM",
		msqlite.AuthCreateTable: "CREATE TABLE", msqlite.AuthCreateTempTable: "CREATE TEMP TABLE",
		msqlite.AuthDropTable: "DROP TABLE", msqlite.AuthDropTempTable: "DROP TABLE",
		msqlite.AuthCreateIndex: "CREATE INDEX", msqlite.AuthCreateTempIndex: "CREATE INDEX",
		msqlite.AuthDropIndex: "DROP INDEX", msqlite.AuthCreateView: "CREATE VIEW",
		msqlite.AuthCreateTempView: "CREATE VIEW", msqlite.AuthCreateTrigger: "CREATE TRIGGER",
		msqlite.AuthCreateTempTrigger: "CREATE TRIGGER", msqlite.AuthAlterTable: "ALTER TABLE",
	}
	if n, ok := names[action]; ok {
		return n + " " + arg
	}
	return fmt.Sprintf("operation %d on %s", action, arg)
}

// guarded runs fn, which runs job text on conn, under g, and removes g
// afterwards. If g refused something, the error says so as a
// *sqltext.RefusedError. tainted reports a connection that must not be
// used again: the job left temporary objects on it, or g could not be
// removed.
func guarded(conn *sql.Conn, g *guard, partition string, fn func() error) (tainted bool, err error) {
	if err := setAuthorizer(conn, g.authorize); err != nil {
		return true, fmt.Errorf("job guard: %w", err)
	}
	err = fn()
	if rerr := setAuthorizer(conn, nil); rerr != nil {
		tainted = true
		err = errors.Join(err, fmt.Errorf("job guard: %w", rerr))
	}
	if err != nil && g.refused != "" && code(err) == sqlite3.SQLITE_AUTH {
		stmt := ""
		if se := (*sqltext.StatementError)(nil); errors.As(err, &se) {
			stmt = se.SQL
		}
		err = &sqltext.RefusedError{Partition: partition, SQL: stmt, What: g.refused, Err: err}
	}
	return tainted || g.temp, err
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
func (t *tx) jobText(ctx context.Context, g *guard, partition string, fn func() error) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tainted, err := guarded(t.conn, g, partition, fn)
	if tainted {
		t.tainted = true
	}
	if t.ended {
		// A conflict clause (INSERT OR ROLLBACK) ends the transaction
		// without a transaction statement for the guard to refuse.
		err = &sqltext.RefusedError{Partition: partition, What: "end the transaction (by " + t.endedBy + ")", Err: errors.Join(err, errEnded)}
	}
	return err
}

// end marks t's transaction ended early, by how.
func (t *tx) end(how string) {
	if !t.ended {
		t.ended, t.endedBy = true, how
	}
}
