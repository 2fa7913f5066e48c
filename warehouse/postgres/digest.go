package postgres

import (
	"context"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// digestVersion is the version of the checksum Digest computes: version 2,
// a hash per column by type (rowhash.go). Version 1, the hash of each row's
// text form, is still computed on request, to compare the rows with a
// checksum stored before version 2.
const digestVersion = 2

var (
	_ refill.VersionedDigester = (*Warehouse)(nil)
	_ refill.VersionedDigester = (*tx)(nil)
)

// Digest returns the row count and checksum of one partition of t.
func (w *Warehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	return w.DigestVersion(ctx, t, partition, digestVersion)
}

// DigestVersion is Digest computed by an earlier version of the checksum
// (or this one).
func (w *Warehouse) DigestVersion(ctx context.Context, t refill.TableRef, partition string, version int) (refill.Digest, error) {
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return digestAt(ctx, tx, t, partition, version)
}

// DigestVersion is Warehouse.DigestVersion inside the transaction.
func (t *tx) DigestVersion(ctx context.Context, ref refill.TableRef, partition string, version int) (refill.Digest, error) {
	if err := t.usable(); err != nil {
		return refill.Digest{}, err
	}
	return digestAt(ctx, t.tx, ref, partition, version)
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

// digest is digestAt the current version.
func digest(ctx context.Context, tx pgx.Tx, t refill.TableRef, partition string) (refill.Digest, error) {
	return digestAt(ctx, tx, t, partition, digestVersion)
}

// digestAt computes a partition's digest in the warehouse, in one statement
// that sums a 64-bit hash of every row: sum() adds the signed hashes
// exactly (in 128 bits, into a numeric), and the sum is reduced modulo
// 2^64 here, which is the same as adding them as unsigned integers with
// wrap-around. How a row is hashed is the version's.
//
// It runs inside a savepoint that is rolled back, after pinning the
// settings that values print with: whatever the statement does to the
// transaction, including failing, the transaction goes on as before.
func digestAt(ctx context.Context, tx pgx.Tx, t refill.TableRef, partition string, version int) (refill.Digest, error) {
	if version != refill.DigestV1 && version != digestVersion {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w: PostgreSQL checksums have versions 1 and %d, not %d", t.Table, refill.ErrDigestVersion, digestVersion, version)
	}
	cols, err := hashColumns(ctx, tx, t.Table)
	if err != nil {
		return refill.Digest{}, err
	}
	plain := make([]refill.Column, len(cols))
	for i, c := range cols {
		plain[i] = c.Column
	}
	p, err := partitionPlanFor(t, plain, partition, partition)
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	var q string
	if version == refill.DigestV1 {
		alias := rowAlias(plain)
		q = fmt.Sprintf("SELECT count(*), coalesce(sum(hashtextextended(%[1]s::text, 0)), 0)::text FROM %[2]s AS %[1]s WHERE %[3]s",
			alias, sqltext.Postgres.QuoteName(t.Table), p.where)
	} else {
		q = fmt.Sprintf("SELECT count(*), coalesce(sum(%s), 0)::text FROM %s WHERE %s",
			rowHash(cols), sqltext.Postgres.QuoteName(t.Table), p.where)
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT refill_digest; "+pinSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	defer tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT refill_digest; RELEASE SAVEPOINT refill_digest", pgx.QueryExecModeSimpleProtocol)
	// Sent unprepared (its values still bound), so that it is planned for
	// its partition every time: a cached statement's generic plan, from
	// its sixth run on a connection, gave up the parallel scan.
	var rows int64
	var sum string
	if err := tx.QueryRow(ctx, q, append([]any{pgx.QueryExecModeExec}, p.args...)...).Scan(&rows, &sum); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	s, ok := new(big.Int).SetString(sum, 10)
	if !ok {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: the warehouse summed to %q", t.Table, partition, sum)
	}
	return refill.NewDigest(version, rows, s.Mod(s, twoTo64).Uint64()), nil
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
