package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	msqlite "modernc.org/sqlite"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Digest returns the row count and checksum of one partition of t.
func (w *Warehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	return digest(ctx, w.db, t, partition)
}

// digest computes a partition's digest in the warehouse, in one statement:
// refill_checksum hashes every row's columns, in table order, and adds the
// hashes modulo 2^64.
func digest(ctx context.Context, db querier, t refill.TableRef, partition string) (refill.Digest, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return refill.Digest{}, err
	}
	f, err := partitionFilter(t, cols, partition, partition)
	if err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s: %w", t.Table, err)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	q := fmt.Sprintf("SELECT count(*), refill_checksum(%s) FROM %s WHERE %s",
		strings.Join(names, ", "), sqltext.SQLite.QuoteName(t.Table), f.where)
	var d refill.Digest
	var sum int64
	if err := db.QueryRowContext(ctx, q, f.args...).Scan(&d.Rows, &sum); err != nil {
		return refill.Digest{}, fmt.Errorf("digest of %s partition %s: %w", t.Table, partition, err)
	}
	// SQLite's checksum has had one version, which carries no mark.
	return refill.NewDigest(refill.DigestV1, d.Rows, uint64(sum)), nil
}

func init() {
	msqlite.MustRegisterFunction("refill_checksum", &msqlite.FunctionImpl{
		NArgs:         -1,
		Deterministic: true,
		// Step hashes its arguments and keeps none of them, so it may read
		// SQLite's buffers in place. In place also means whole: a copied
		// text argument would end at its first NUL byte.
		VolatileArgs: true,
		MakeAggregate: func(msqlite.FunctionContext) (msqlite.AggregateFunction, error) {
			return new(checksumAgg), nil
		},
	})
}

// checksumAgg is refill_checksum(columns...): the sum modulo 2^64 of a
// 64-bit hash of each row. A sum, unlike XOR, counts duplicates: two equal
// rows add their hash twice instead of cancelling out. The result is the
// sum as a signed 64-bit integer, which Digest prints as 16 hex digits.
type checksumAgg struct {
	sum uint64
}

func (a *checksumAgg) Step(_ *msqlite.FunctionContext, args []driver.Value) error {
	a.sum += rowHash(args)
	return nil
}

func (a *checksumAgg) WindowInverse(_ *msqlite.FunctionContext, args []driver.Value) error {
	a.sum -= rowHash(args)
	return nil
}

func (a *checksumAgg) WindowValue(*msqlite.FunctionContext) (driver.Value, error) {
	return int64(a.sum), nil
}

func (a *checksumAgg) Final(*msqlite.FunctionContext) {}

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Type tags, so that values of different types never hash alike: NULL, the
// empty string and 0 are three different rows.
const (
	tagNull = iota + 1
	tagInt
	tagFloat
	tagText
	tagBlob
)

// rowHash hashes one row: FNV-1a over each value's type tag and bytes, text
// and blobs prefixed with their length so that ('ab', 'c') and ('a', 'bc')
// differ, then a final mix (MurmurHash3's fmix64) so that every bit of the
// result depends on every input bit and sums of hashes stay uniform.
func rowHash(args []driver.Value) uint64 {
	h := uint64(fnvOffset)
	var buf [9]byte
	for _, v := range args {
		switch v := v.(type) {
		case nil:
			h = fnvByte(h, tagNull)
		case int64:
			buf[0] = tagInt
			binary.LittleEndian.PutUint64(buf[1:], uint64(v))
			h = fnvBytes(h, buf[:])
		case float64:
			if v == 0 {
				v = 0 // -0 is 0, as SQLite compares it
			}
			buf[0] = tagFloat
			binary.LittleEndian.PutUint64(buf[1:], math.Float64bits(v))
			h = fnvBytes(h, buf[:])
		case string:
			buf[0] = tagText
			binary.LittleEndian.PutUint64(buf[1:], uint64(len(v)))
			h = fnvString(fnvBytes(h, buf[:]), v)
		case []byte:
			buf[0] = tagBlob
			binary.LittleEndian.PutUint64(buf[1:], uint64(len(v)))
			h = fnvBytes(fnvBytes(h, buf[:]), v)
		default: // SQLite hands over no other types
			h = fnvString(h, fmt.Sprintf("%T:%v", v, v))
		}
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}
