package postgres

import (
	"context"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Digest returns the row count and checksum of one partition of t.
func (w *Warehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return digest(ctx, tx, t, partition)
}

// twoTo64 is the checksum's modulus.
var twoTo64 = new(big.Int).Lsh(big.NewInt(1), 64)

// pinSettings fixes, for the rest of the (sub)transaction, every setting
// that changes how a row prints, so that a digest depends on the rows
// alone: not on the connection's TimeZone or DateStyle, and not on a job
// that changes them between two builds of a proof.
const pinSettings = `SELECT set_config('TimeZone', 'UTC', true), set_config('DateStyle', 'ISO, YMD', true),
	set_config('IntervalStyle', 'postgres', true), set_config('extra_float_digits', '1', true),
	set_config('bytea_output', 'hex', true), set_config('lc_monetary', 'C', true)`

// digest computes a partition's digest in the warehouse, in one statement.
// Each row's hash is hashtextextended of the row's text form: every column,
// in table order, as PostgreSQL prints a record, quoted where needed, so
// that ('ab','c') and ('a','bc') differ, and with NULL printed as nothing
// and the empty string as "". The hashes are signed 64-bit integers; sum()
// adds them exactly (in 128 bits, into a numeric), and the sum is reduced
// modulo 2^64 here, which is the same as adding the hashes as unsigned
// integers with wrap-around.
//
// It runs inside a savepoint that is rolled back, after pinning the
// settings that rows print with: whatever the statement does to the
// transaction, including failing, the transaction goes on as before.
func digest(ctx context.Context, tx pgx.Tx, t refill.TableRef, partition string) (refill.Digest, error) {
	cols, err := columns(ctx, tx, t.Table)
	if err != nil {
		return refill.Digest{}, err
	}
	p, err := partitionPlanFor(t, cols, partition, partition)
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	q := fmt.Sprintf("SELECT count(*), coalesce(sum(hashtextextended(%[1]s::text, 0)), 0)::text FROM %[2]s AS %[1]s WHERE %[3]s",
		rowAlias(cols), sqltext.Postgres.QuoteName(t.Table), p.where)
	if _, err := tx.Exec(ctx, "SAVEPOINT refill_digest; "+pinSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	defer tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT refill_digest; RELEASE SAVEPOINT refill_digest", pgx.QueryExecModeSimpleProtocol)
	var d refill.Digest
	var sum string
	if err := tx.QueryRow(ctx, q, p.args...).Scan(&d.Rows, &sum); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	s, ok := new(big.Int).SetString(sum, 10)
	if !ok {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: the warehouse summed to %q", t.Table, partition, sum)
	}
	d.Checksum = fmt.Sprintf("%016x", s.Mod(s, twoTo64).Uint64())
	return d, nil
}

// rowAlias returns a table alias that is no column's name, so that it names
// the whole row: with a column of the same name, the alias would mean the
// column.
func rowAlias(cols []refill.Column) string {
	taken := make(map[string]bool, len(cols))
	for _, c := range cols {
		taken[c.Name] = true
	}
	alias := "row_"
	for taken[alias] {
		alias += "_"
	}
	return sqltext.QuoteIdent(alias)
}
