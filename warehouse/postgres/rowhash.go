package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Version 2 of the checksum hashes each value with PostgreSQL's own 64-bit
// hash for its type, in C, instead of printing the row as text and hashing
// that (version 1): printing a row cost about a microsecond, ten times a
// scan that reads it (BENCHMARKS.md, "Checksums on PostgreSQL").
//
// A row's hash is a chain through its columns in table order: each value is
// hashed with the hash of the values before it as the seed,
//
//	h0 = K # nulls(row);  h_i = hash_i(value_i, h_(i-1));  row hash = h_n
//
// so that the position of a value matters (('ab', 'c') and ('a', 'bc')
// differ, and so do rows that swap values between them: the chain is not
// linear, unlike PostgreSQL's hash_record_extended, whose rows could be
// summed apart and together again). The partition's checksum is the sum of
// the row hashes modulo 2^64, as in version 1: order does not count,
// duplicates do.
//
// Every step uses every bit of its value. PostgreSQL's hashes fold some
// types, and those are hashed differently:
//
//   - bigint: hashint8extended folds 64 bits into 32 (1 and 4294967296 hash
//     alike), so the value is also XORed into the seed, which keeps all 64.
//   - double precision: hashfloat8extended returns the seed as it is for
//     zero, so each float column XORs its own constant into the seed,
//     keeping (0, x) and (x, 0) apart. -0 and 0 are one value, and so are
//     all NaNs, as PostgreSQL compares them.
//   - timestamps are hashed as seconds from 2000 in a double
//     (tstzrange_subdiff), which is exact to the microsecond from 1800 to
//     2200 (|seconds| < 2^33, where a double's spacing is under 10^-6);
//     outside that range the text form's hash goes into the seed as well.
//     The column's constant goes into the seed as for doubles, for 2000
//     itself (zero seconds).
//   - date: its day number, with the two infinities apart.
//   - numeric is hashed as text: hash_numeric_extended ignores the sign and
//     the scale (5 and -5, 1.0 and 1.00 hash alike).
//   - text and varchar are hashed byte for byte (COLLATE "C": a case- or
//     accent-insensitive collation would hash 'A' and 'a' alike); char(n)
//     without its trailing blanks, as PostgreSQL compares it.
//   - every other type is hashed as text, with the settings that print it
//     pinned (pinSettings).
//
// A NULL is hashed as the type's zero, and told apart by nulls(row): which
// nullable columns are NULL, looked up four columns at a time in a tree of
// CASEs (no function calls) whose leaves are constants, XORed together
// into the first seed. A column declared NOT NULL is left out of the tree,
// which changes nothing for its rows: a copy of the table without the
// constraint (a snapshot) has the same checksum.
//
// The constants are part of the version: changing any of them, or any
// step, is a new version.

// hashColumn is a column as the checksum hashes it.
type hashColumn struct {
	refill.Column
	notNull bool
	// base is the OID of the column's type, or of a domain's base type.
	base uint32
}

// hashColumns returns t's columns, in table order, with what rowHash needs.
func hashColumns(ctx context.Context, db querier, table string) ([]hashColumn, error) {
	rows, err := db.Query(ctx, `SELECT a.attname, lower(format_type(a.atttypid, a.atttypmod)), a.attnotnull,
	CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, sqltext.Postgres.QuoteName(table))
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hashColumn, error) {
		var c hashColumn
		err := r.Scan(&c.Name, &c.Type, &c.notNull, &c.base)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil, noTable(ctx, db, table)
	}
	return cols, nil
}

// Type OIDs (pg_type.dat) that rowHash hashes natively.
const (
	oidBool        = 16
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidFloat4      = 700
	oidFloat8      = 701
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
)

// nullChunk is how many columns one tree of nulls(row) covers: 2^4
// leaves, which keeps the statement small even for 1,600 columns (trees
// of 8 made one five times slower to plan).
const nullChunk = 4

// rowHash is the SQL expression of a row's version-2 hash.
func rowHash(cols []hashColumn) string {
	// The chain nests each step around the one before; it is written as
	// the steps' openings, outermost first, the seed, and their closings,
	// so that a wide table costs linear, not quadratic, time.
	open := make([]string, len(cols))
	closing := make([]string, len(cols))
	for i, c := range cols {
		open[i], closing[i] = hashStep(sqltext.QuoteIdent(c.Name), c.base, i)
	}
	var b strings.Builder
	for i := len(cols) - 1; i >= 0; i-- {
		b.WriteString(open[i])
	}
	b.WriteString(nullSeed(cols))
	for _, s := range closing {
		b.WriteString(s)
	}
	return b.String()
}

// hashStep returns the SQL around the seed (the hash of the columns before)
// that hashes column col, of type base, at position i: open + seed + close.
func hashStep(col string, base uint32, i int) (open, close string) {
	const (
		epochTZ = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"
		lowTZ   = "TIMESTAMPTZ '1800-01-01 00:00:00+00'"
		highTZ  = "TIMESTAMPTZ '2200-01-01 00:00:00+00'"
		epoch   = "TIMESTAMP '2000-01-01 00:00:00'"
		low     = "TIMESTAMP '1800-01-01 00:00:00'"
		high    = "TIMESTAMP '2200-01-01 00:00:00'"
	)
	p := int8Literal(positionConstant(i))
	switch base {
	case oidText, oidVarchar:
		return fmt.Sprintf(`hashtextextended(coalesce(%s, '') COLLATE "C", `, col), ")"
	case oidBpchar:
		return fmt.Sprintf(`hashbpcharextended(coalesce(%s, '') COLLATE "C", `, col), ")"
	case oidInt2, oidInt4:
		return fmt.Sprintf("hashint4extended(coalesce(%s::integer, 0), ", col), ")"
	case oidInt8:
		return fmt.Sprintf("hashint8extended(coalesce(%s, 0), (", col), fmt.Sprintf(" # coalesce(%s, 0)))", col)
	case oidFloat4, oidFloat8:
		return fmt.Sprintf("hashfloat8extended(coalesce(%s::double precision, 0), (", col), fmt.Sprintf(" # %s))", p)
	case oidBool:
		return fmt.Sprintf("hashint4extended(CASE WHEN %s THEN 1 ELSE 0 END, ", col), ")"
	case oidDate:
		return fmt.Sprintf("hashint4extended(CASE WHEN isfinite(%[1]s) THEN %[1]s - DATE '2000-01-01' WHEN %[1]s > DATE '2000-01-01' THEN 2147483647 WHEN %[1]s < DATE '2000-01-01' THEN -2147483647 - 1 ELSE 0 END, ", col), ")"
	case oidTimestamptz:
		return fmt.Sprintf("hashfloat8extended(coalesce(tstzrange_subdiff(%s, %s), 0), (", col, epochTZ),
			fmt.Sprintf(" # CASE WHEN %[1]s >= %[2]s AND %[1]s < %[3]s THEN %[4]s ELSE hashtextextended(coalesce(%[1]s::text, ''), %[4]s) END))", col, lowTZ, highTZ, p)
	case oidTimestamp:
		return fmt.Sprintf("hashfloat8extended(coalesce(tsrange_subdiff(%s, %s), 0), (", col, epoch),
			fmt.Sprintf(" # CASE WHEN %[1]s >= %[2]s AND %[1]s < %[3]s THEN %[4]s ELSE hashtextextended(coalesce(%[1]s::text, ''), %[4]s) END))", col, low, high, p)
	case oidUUID:
		return fmt.Sprintf("uuid_hash_extended(coalesce(%s, '00000000-0000-0000-0000-000000000000'), ", col), ")"
	}
	return fmt.Sprintf(`hashtextextended(coalesce(%s::text, '') COLLATE "C", `, col), ")"
}

// nullSeed is h0: the version's constant XORed with one constant per
// group of nullChunk columns, chosen by which of its nullable columns are
// NULL (0 when none is).
func nullSeed(cols []hashColumn) string {
	var b strings.Builder
	b.WriteString(int8Literal(seedConstant))
	for chunk := 0; chunk*nullChunk < len(cols); chunk++ {
		var nullable []int
		for i := chunk * nullChunk; i < min(len(cols), (chunk+1)*nullChunk); i++ {
			if !cols[i].notNull {
				nullable = append(nullable, i)
			}
		}
		if len(nullable) > 0 {
			b.WriteString(" # ")
			nullTree(&b, cols, chunk, nullable, 0)
		}
	}
	return b.String()
}

// nullTree writes a CASE that tests each column of nullable in turn and
// ends in the constant for the chunk's NULL columns (bits, by position in
// the chunk).
func nullTree(b *strings.Builder, cols []hashColumn, chunk int, nullable []int, bits uint64) {
	if len(nullable) == 0 {
		if bits == 0 {
			b.WriteString("0")
		} else {
			b.WriteString(int8Literal(nullConstant(chunk, bits)))
		}
		return
	}
	i := nullable[0]
	fmt.Fprintf(b, "(CASE WHEN %s IS NULL THEN ", sqltext.QuoteIdent(cols[i].Name))
	nullTree(b, cols, chunk, nullable[1:], bits|1<<(i%nullChunk))
	b.WriteString(" ELSE ")
	nullTree(b, cols, chunk, nullable[1:], bits)
	b.WriteString(" END)")
}

// The version's constants: splitmix64 of inputs kept apart by their top
// bits. splitmix64 is a bijection, so no two are equal.
var seedConstant = splitmix64(3<<62 | 2)

func positionConstant(i int) uint64 { return splitmix64(1<<62 | uint64(i)) }

func nullConstant(chunk int, bits uint64) uint64 {
	return splitmix64(2<<62 | uint64(chunk)<<nullChunk | bits)
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// int8Literal writes x as a bigint constant (its two's complement).
func int8Literal(x uint64) string {
	if int64(x) == math.MinInt64 {
		return "(-9223372036854775807 - 1)"
	}
	return "(" + strconv.FormatInt(int64(x), 10) + ")"
}
