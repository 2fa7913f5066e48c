package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// An sql job's statements run inside DO blocks, and it is PostgreSQL that
// keeps them inside refill's transaction. Each statement is the string of
// an EXECUTE in a DO block's body, run as plain SQL (a SELECT needs no
// INTO, names mean what they mean outside PL/pgSQL), and PostgreSQL
// refuses a transaction command there ("EXECUTE of transaction commands is
// not implemented"), as it refuses a COMMIT from any DO block or procedure
// running inside a transaction block ("invalid transaction termination").
// Both the block's body and the statement are quoted with dollar tags that
// are random and absent from the text, so no text can close a quote early;
// and the DO goes to the server with the extended protocol, which takes
// exactly one statement. The statement splitter only numbers statements for
// error messages: if it is wrong, the text fails inside the EXECUTE; it
// does not escape it.

// partitionKey is the whole form a partition key may take: a day, or a day
// and an hour.
var partitionKey = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2})?$`)

// partitionLiteral renders partition as a quoted SQL string literal, for
// the DO blocks of sql jobs, which take no parameters. It refuses anything
// but a day (YYYY-MM-DD) or an hour (YYYY-MM-DDTHH) that is a real date
// and time: such a value is made of ASCII digits, '-' and 'T' only, so it
// can hold no quote to end the literal and no '$' to end the DO block's
// body, and inlining it is as safe as binding it.
func partitionLiteral(partition string) (string, error) {
	if !partitionKey.MatchString(partition) {
		return "", refill.BadInputf("partition %q is not a day (YYYY-MM-DD) or an hour (YYYY-MM-DDTHH)", partition)
	}
	grain := refill.GrainDay
	if len(partition) > 10 {
		grain = refill.GrainHour
	}
	if _, err := refill.PartitionTime(partition, grain); err != nil {
		return "", err
	}
	return "'" + partition + "'", nil
}

// doBlock wraps one statement of an sql job in a DO block that EXECUTEs
// it. The block's body and the statement are each quoted with a random
// dollar tag that does not occur in what it quotes.
func doBlock(stmt string) string {
	inner := dollarTag(stmt)
	body := "BEGIN EXECUTE " + inner + stmt + inner + "; END"
	outer := dollarTag(body)
	return "DO " + outer + body + outer
}

// dollarTag returns a random dollar-quote tag that does not occur in s.
func dollarTag(s string) string {
	for {
		var b [12]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		tag := "$refill_" + hex.EncodeToString(b[:]) + "$"
		if !strings.Contains(s, tag) {
			return tag
		}
	}
}

// errFailed is every call on a transaction in which job text failed: only
// the rollback is left, so that a caller that missed the error cannot
// commit half a job (most failures abort a PostgreSQL transaction anyway;
// a row outside the partition does not).
var errFailed = errors.New("the warehouse transaction refuses further work: a job failed in it, so only a rollback is left")

// usable returns errFailed once job text has failed in t.
func (t *tx) usable() error {
	if t.failed {
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

// jobSettings fixes, for the rest of the transaction, the settings job
// text runs with: TimeZone UTC, so that a job splits time into partitions
// as refill does. It returns what restoreSettings puts back after the job.
func (t *tx) jobSettings(ctx context.Context) (jobState, error) {
	t.jobRan = true
	var s jobState
	if err := t.tx.QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('role'), set_config('TimeZone', 'UTC', true)").Scan(&s.searchPath, &s.role, nil); err != nil {
		return s, fmt.Errorf("job settings: %w", err)
	}
	return s, nil
}

// jobState is what refill's own statements depend on that a job can
// change with SET: where unqualified names resolve, and as whom they run.
type jobState struct {
	searchPath, role string
}

// restoreSettings puts back, for the rest of the transaction, what job
// text may have changed that refill's own statements depend on, so that a
// job's SET search_path cannot move refill's digests and publish marks to
// other tables.
func (t *tx) restoreSettings(ctx context.Context, s jobState) error {
	if _, err := t.tx.Exec(ctx, "SELECT set_config('search_path', $1, true), set_config('role', $2, true), set_config('TimeZone', 'UTC', true)", s.searchPath, s.role); err != nil {
		return fmt.Errorf("job settings: %w", err)
	}
	return nil
}

// execDo runs one DO block with the extended protocol, which refuses more
// than one statement.
func (t *tx) execDo(ctx context.Context, block string) error {
	return t.tx.Conn().PgConn().ExecParams(ctx, block, nil, nil, nil, nil).Read().Err
}

// jobError classifies a failed statement of an sql job: an attempt to end
// or control the transaction is a *sqltext.RefusedError (bad input); any
// other failure is a *sqltext.StatementError, the job's own. A refusal
// wraps the statement's error, as on SQLite, so that both name the
// statement.
func jobError(err error, n, of int, table, partition, stmt string) error {
	excerpt := sqltext.Postgres.Excerpt(stmt)
	failed := &sqltext.StatementError{N: n, Of: of, Partition: partition, SQL: excerpt, Err: err}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "2D000", // invalid_transaction_termination: COMMIT, ROLLBACK
			pg.Code == "0A000" && strings.Contains(pg.Message, "transaction command"), // any, in EXECUTE
			pg.Code == "25001": // active_sql_transaction, e.g. a nested transaction block
			what := sqltext.Postgres.TransactionControl(stmt)
			if what == "" {
				what = "end"
			}
			return &sqltext.RefusedError{Partition: partition, Table: table, SQL: excerpt, What: "control the transaction (" + what + ")", Err: failed}
		}
	}
	return failed
}

// cleanSession returns a connection on which job text ran to the state a
// new one has, before it goes back to the pool: a job's SET (not LOCAL)
// survives the transaction's end, and would otherwise steer later work of
// refill's on the same connection, such as another plan's publish. DISCARD
// ALL also drops prepared statements, so pgx's caches of them are reset.
func cleanSession(ctx context.Context, c *pgx.Conn) error {
	if err := c.PgConn().Exec(ctx, "DISCARD ALL").Close(); err != nil {
		return err
	}
	return c.DeallocateAll(ctx)
}
