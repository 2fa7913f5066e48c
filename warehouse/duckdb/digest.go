//go:build duckdb

package duckdb

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// digestVersion is the version of DuckDB's checksum: the sum of hash() of
// each row's values, in table order. DuckDB's hash() is its own and may
// change between DuckDB releases: a checksum stored before such an
// upgrade then no longer matches the same rows, and refill reports the
// partition changed (never unchanged).
const digestVersion = 2

var twoTo64 = new(big.Int).Lsh(big.NewInt(1), 64)

// Digest returns the row count and checksum of one partition of t.
func (w *Warehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	db, done, err := w.inst.use()
	if err != nil {
		return refill.Digest{}, err
	}
	defer done()
	return digest(ctx, db, t, partition)
}

// DigestVersion is Digest for the one version DuckDB computes.
func (w *Warehouse) DigestVersion(ctx context.Context, t refill.TableRef, partition string, version int) (refill.Digest, error) {
	if version != digestVersion {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w: DuckDB checksums have version %d, not %d", t.Table, refill.ErrDigestVersion, digestVersion, version)
	}
	return w.Digest(ctx, t, partition)
}

// rowHash is the hash of one row of cols, as the checksum adds them.
func rowHash(cols []refill.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	return "hash(" + strings.Join(names, ", ") + ")"
}

func digest(ctx context.Context, db querier, t refill.TableRef, partition string) (refill.Digest, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return refill.Digest{}, err
	}
	f, err := partitionFilter(t, cols, partition, partition)
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	var rows int64
	var sum string
	q := fmt.Sprintf("SELECT count(*), CAST(coalesce(sum(%s::HUGEINT), 0) AS VARCHAR) FROM %s WHERE %s", rowHash(cols), d.QuoteName(t.Table), f.where)
	if err := db.QueryRowContext(ctx, q, f.args...).Scan(&rows, &sum); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	s, ok := new(big.Int).SetString(sum, 10)
	if !ok {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: the warehouse summed to %q", t.Table, partition, sum)
	}
	return refill.NewDigest(digestVersion, rows, s.Mod(s, twoTo64).Uint64()), nil
}
