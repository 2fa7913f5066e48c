package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// What job text may touch is checked by PostgreSQL's own bookkeeping of
// the transaction, not by reading the text:
//
//   - Its statistics. pg_stat_xact_all_tables counts, for the current
//     transaction alone, the rows each table (system catalogues included)
//     had inserted, updated and deleted, and the scans and fetches it had.
//     refill reads it just before and just after a job's text, and refuses
//     the job if the counts moved for a table other than its own (or its
//     own table's partitions), for refill's own tables (refill_*: writes,
//     and also reads, so that a job cannot tell a proof from a real apply),
//     or for a system catalogue: every CREATE, ALTER, DROP, TRUNCATE,
//     GRANT, COMMENT, ANALYZE, REINDEX or CLUSTER writes one, temporary
//     objects included, so that no table, trigger, function or view of a
//     job outlives it or carries over from one build of a proof to the
//     next. The counts are the transaction's own, so another session's
//     DDL or writes do not count against the job; they include what
//     triggers and cascades did on the job's behalf, and what a
//     subtransaction did and rolled back.
//   - A trigger (the partition fence). Before a job's text runs, refill
//     puts a BEFORE ROW trigger on the job's table, inside the transaction,
//     whose function raises SQLSTATE RF001 for any row inserted, updated or
//     deleted outside the partition being built, tested with the same key
//     expression partitions are counted by. It is created once per table
//     and transaction, enabled ALWAYS (so session_replication_role cannot
//     silence it), and sorts after any trigger of the owner's (so it sees
//     the row as it will be written). Between jobs its function is replaced
//     by one that lets every row pass, which takes no lock; a rollback
//     removes both, and Transact drops them before it commits.
//
// What this does not catch: a job that writes outside the database
// (COPY TO a file, dblink, large objects exported with lo_export: all need
// privileges refill's role should not have); sequences moved by nextval
// or setval, which are not transactional; a read of refill's tables done
// by parallel workers alone (the job turns parallel_leader_participation
// off), which the workers count, not the transaction; metadata that is
// not a table's rows (pg_class.reltuples, pg_stat_*, pg_stat_xact_* itself:
// a job can read that refill_published had a row inserted earlier in the
// same transaction, which a real apply does before its job and a proof
// does not); and anything at all done as a superuser, who can turn the
// statistics off (track_counts) or run programs. Writes cannot hide in
// parallel workers: PostgreSQL runs no INSERT, UPDATE or DELETE in them.
// Session state other than temporary objects (settings, prepared
// statements, cursors, advisory locks) still carries from one build of a
// proof to the next, as the builds share one session.
//
// The fence costs a plpgsql call per row written, and locks: creating it
// takes SHARE ROW EXCLUSIVE on the table, which other writers wait for
// until the transaction ends (a proof included), and dropping it before a
// commit takes ACCESS EXCLUSIVE, which readers wait for until the commit.
// refill's role needs to own the table or hold TRIGGER on it.

// fenceTrigger is the partition fence's trigger name: '~' sorts after
// letters, and triggers fire in the order of their names.
const fenceTrigger = `"~refill_partition"`

// outsideCode is the SQLSTATE the partition fence raises.
const outsideCode = "RF001"

// partitionFence is the partition fence on one table in one transaction.
type partitionFence struct {
	// table is the table, quoted; fn the fence's function.
	table, fn string
	// own holds the table and its partitions, which its job may write.
	own map[uint32]bool
}

// fence returns ref's partition fence in t's transaction, creating it the
// first time. It lets every row through until arm.
func (t *tx) fence(ctx context.Context, ref refill.TableRef) (*partitionFence, error) {
	// A table that is not partitioned has no partition tree.
	rows, err := t.tx.Query(ctx, `SELECT oid, 0 FROM pg_catalog.pg_class WHERE oid = to_regclass($1)
UNION ALL
SELECT relid::oid, level FROM pg_catalog.pg_partition_tree(to_regclass($1)) WHERE level > 0`, sqltext.Postgres.QuoteName(ref.Table))
	if err != nil {
		return nil, fmt.Errorf("partition guard on %s: %w", ref.Table, err)
	}
	own := map[uint32]bool{}
	var root uint32
	var relid uint32
	var level int
	_, err = pgx.ForEachRow(rows, []any{&relid, &level}, func() error {
		own[relid] = true
		if level == 0 {
			root = relid
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("partition guard on %s: %w", ref.Table, err)
	}
	if root == 0 {
		return nil, fmt.Errorf("%w: %s", refill.ErrNoTable, ref.Table)
	}
	if f, ok := t.fences[root]; ok {
		return f, nil
	}
	f := &partitionFence{table: sqltext.Postgres.QuoteName(ref.Table), fn: fmt.Sprintf("pg_temp.refill_partition_%d", root), own: own}
	create := fmt.Sprintf("%s;\nCREATE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s();\nALTER TABLE %s ENABLE ALWAYS TRIGGER %s",
		fenceFunction(f.fn, "", false), fenceTrigger, f.table, f.fn, f.table, fenceTrigger)
	if _, err := t.tx.Conn().PgConn().Exec(ctx, create).ReadAll(); err != nil {
		return nil, fmt.Errorf("partition guard on %s: %w", ref.Table, err)
	}
	if t.fences == nil {
		t.fences = map[uint32]*partitionFence{}
	}
	t.fences[root] = f
	return f, nil
}

// arm makes f refuse rows outside partition of ref, whose columns are cols.
func (t *tx) arm(ctx context.Context, f *partitionFence, ref refill.TableRef, cols []refill.Column, partition string) error {
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return err
	}
	check := func(row string) (string, error) {
		p, err := partitionPlanOn(ref, cols, partition, partition, row)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf(`IF (%[1]s) IS DISTINCT FROM '%[2]s' THEN
    RAISE EXCEPTION USING ERRCODE = '%[3]s', MESSAGE = 'refill: a row outside the partition being built', DETAIL = coalesce(%[4]s.%[5]s::text, 'NULL');
  END IF;`, p.key, partition, outsideCode, row, sqltext.QuoteIdent(pc.Name)), nil
	}
	// partitionLiteral has checked partition: it holds no quote.
	oldCheck, err := check("OLD")
	if err != nil {
		return err
	}
	newCheck, err := check("NEW")
	if err != nil {
		return err
	}
	body := fmt.Sprintf("IF TG_OP <> 'INSERT' THEN\n  %s\n  END IF;\n  IF TG_OP <> 'DELETE' THEN\n  %s\n  END IF;", oldCheck, newCheck)
	if _, err := t.tx.Conn().PgConn().Exec(ctx, fenceFunction(f.fn, body, true)).ReadAll(); err != nil {
		return fmt.Errorf("partition guard on %s: %w", ref.Table, err)
	}
	return nil
}

// disarm makes f let every row through again, for refill's own writes and
// other partitions' jobs later in the transaction.
func (t *tx) disarm(ctx context.Context, f *partitionFence) error {
	if _, err := t.tx.Conn().PgConn().Exec(ctx, fenceFunction(f.fn, "", true)).ReadAll(); err != nil {
		return fmt.Errorf("partition guard on %s: %w", f.table, err)
	}
	return nil
}

// dropFences drops t's partition fences, before its transaction commits.
func (t *tx) dropFences(ctx context.Context) error {
	var b strings.Builder
	for _, f := range t.fences {
		fmt.Fprintf(&b, "DROP TRIGGER %s ON %s;\nDROP FUNCTION %s();\n", fenceTrigger, f.table, f.fn)
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := t.tx.Conn().PgConn().Exec(ctx, b.String()).ReadAll(); err != nil {
		return fmt.Errorf("partition guard: %w", err)
	}
	t.fences = nil
	return nil
}

// fenceFunction is the statement that creates (or replaces) the fence's
// function fn running checks before it lets the row through.
func fenceFunction(fn, checks string, replace bool) string {
	body := "BEGIN\n  " + checks + "\n  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;\n  RETURN NEW;\nEND"
	tag := dollarTag(body)
	verb := "CREATE"
	if replace {
		verb = "CREATE OR REPLACE"
	}
	return fmt.Sprintf("%s FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS %s%s%s", verb, fn, tag, body, tag)
}

// outsidePartition returns the *refill.OutsidePartitionError for err if the
// partition fence raised it.
func outsidePartition(err error, ref refill.TableRef, partition string) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == outsideCode {
		return &refill.OutsidePartitionError{Table: ref.Table, Partition: partition, Value: pg.Detail}
	}
	return nil
}

// tableCount is what one table's counters in pg_stat_xact_all_tables (and
// pg_stat_get_xact_blocks_fetched) say the transaction did to it.
type tableCount struct {
	schema, name string
	// writes are rows inserted, updated and deleted.
	writes [3]int64
	// reads are scans, rows and blocks fetched, counted for refill's own
	// tables only.
	reads int64
}

// tableCounts reads the counters of every table the transaction db is in has
// touched so far. Tables it has not touched are left out: their counters
// are zero before and after.
func tableCounts(ctx context.Context, db querier) (map[uint32]tableCount, error) {
	// A read shows as a scan, or as a block of the table fetched (a TID
	// scan counts no scan). The counts exist only with track_counts on,
	// which the outer join reports even when no table was touched.
	rows, err := db.Query(ctx, `SELECT current_setting('track_counts')::bool, s.relid, s.schemaname, s.relname, s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.reads
FROM (SELECT 1) one LEFT JOIN (
  SELECT relid::oid, schemaname::text, relname::text, n_tup_ins, n_tup_upd, n_tup_del,
    CASE WHEN relname LIKE 'refill\_%' AND schemaname <> 'pg_catalog'
      THEN seq_scan + seq_tup_read + coalesce(idx_scan, 0) + coalesce(idx_tup_fetch, 0) + pg_catalog.pg_stat_get_xact_blocks_fetched(relid)
      ELSE 0 END AS reads
  FROM pg_catalog.pg_stat_xact_all_tables
  WHERE schemaname <> 'pg_toast'
) s ON s.n_tup_ins <> 0 OR s.n_tup_upd <> 0 OR s.n_tup_del <> 0 OR s.reads <> 0`)
	if err != nil {
		return nil, fmt.Errorf("job guard: %w", err)
	}
	out := map[uint32]tableCount{}
	var on bool
	var relid *uint32
	var c struct {
		schema, name         *string
		ins, upd, del, reads *int64
	}
	_, err = pgx.ForEachRow(rows, []any{&on, &relid, &c.schema, &c.name, &c.ins, &c.upd, &c.del, &c.reads}, func() error {
		if relid != nil {
			out[*relid] = tableCount{schema: *c.schema, name: *c.name, writes: [3]int64{*c.ins, *c.upd, *c.del}, reads: *c.reads}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job guard: %w", err)
	}
	if !on {
		return nil, errNoCounts
	}
	return out, nil
}

// errNoCounts is a server whose statistics cannot show what a job did.
var errNoCounts = errors.New("job guard: the PostgreSQL server counts no table statistics (track_counts is off), so refill cannot check what a job wrote or read; turn track_counts on (it is on by default)")

// errCounted is the cause of a refusal that the transaction's statistics
// showed after the job ran.
var errCounted = errors.New("seen in PostgreSQL's statistics of the transaction, pg_stat_xact_all_tables, after the job's statements ran")

// judge compares the transaction's counters before and after a job and
// refuses what it did that its policy does not allow. An sql job may write
// only the tables in own; a query job's writes are refill's INSERT, and
// its other writes are not judged. Neither may change a system catalogue,
// or read or write one of refill's own tables.
func judge(before, after map[uint32]tableCount, own map[uint32]bool, sqlJob bool, table, partition string) error {
	var catalogs, refillWrites, writes, reads []string
	seen := map[uint32]bool{}
	for _, counts := range []map[uint32]tableCount{after, before} {
		for relid, c := range counts {
			if seen[relid] || own[relid] {
				continue
			}
			seen[relid] = true
			// A table missing on one side had zero counters there (TRUNCATE
			// resets them).
			a, b := after[relid], before[relid]
			if a.writes != b.writes {
				switch {
				case c.schema == "pg_catalog":
					catalogs = append(catalogs, c.name)
				case refillTable(c.name):
					refillWrites = append(refillWrites, c.name)
				case sqlJob:
					writes = append(writes, c.name)
				}
			}
			if a.reads != b.reads && refillTable(c.name) && c.schema != "pg_catalog" {
				reads = append(reads, c.name)
			}
		}
	}
	refuse := func(what, rule string, names []string) error {
		slices.Sort(names)
		names = slices.Compact(names)
		return &sqltext.RefusedError{Partition: partition, Table: table, What: fmt.Sprintf(what, strings.Join(names, ", ")), Rule: rule, Err: errCounted}
	}
	switch {
	case len(catalogs) > 0:
		return refuse("change the warehouse's schema (CREATE, ALTER, DROP, TRUNCATE, GRANT, ANALYZE or the like: it changed %s)", sqltext.RuleSchema, catalogs)
	case len(refillWrites) > 0:
		return refuse("write refill's own table %s", sqltext.RuleOwnTables, refillWrites)
	case len(writes) > 0:
		return refuse("write table %s", sqltext.RuleOwnTable, writes)
	case len(reads) > 0:
		return refuse("read refill's own table %s", sqltext.RuleOwnTables, reads)
	}
	return nil
}

// refillTable reports whether name is one of refill's own tables
// (refill_published, refill_audit_anchor, snapshots), which all start
// with refill_.
func refillTable(name string) bool {
	return strings.HasPrefix(name, "refill_")
}
