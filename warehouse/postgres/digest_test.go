package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
)

// digester makes tables of one partition (day 2026-11-01) and digests
// them.
type digester struct {
	t *testing.T
	w *postgres.Warehouse
	n int
}

func newDigester(t *testing.T) *digester {
	t.Helper()
	w, err := postgres.Open(t.Context(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &digester{t: t, w: w}
}

func (d *digester) exec(sql string) {
	d.t.Helper()
	if _, err := d.w.Pool().Exec(d.t.Context(), sql); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
}

// table creates a table with the given columns after day and the given
// rows (their values after day's), and returns its name.
func (d *digester) table(cols string, rows ...string) string {
	d.t.Helper()
	d.n++
	name := fmt.Sprintf("t%d", d.n)
	d.exec(fmt.Sprintf("CREATE TABLE %s (day date, %s)", name, cols))
	for _, r := range rows {
		d.exec(fmt.Sprintf("INSERT INTO %s VALUES ('2026-11-01', %s)", name, r))
	}
	return name
}

func (d *digester) digest(table string, version int) refill.Digest {
	d.t.Helper()
	dg, err := d.w.DigestVersion(d.t.Context(), refill.TableRef{Table: table, Column: "day", Grain: refill.GrainDay}, "2026-11-01", version)
	if err != nil {
		d.t.Fatalf("digest of %s: %v", table, err)
	}
	return dg
}

// apart fails the test unless every case has its own checksum, in version
// 2 and in version 1. Each case is a list of rows of the columns cols.
func (d *digester) apart(cols string, cases map[string][]string) {
	d.t.Helper()
	for _, version := range []int{2, 1} {
		seen := map[string]string{}
		for name, rows := range cases {
			dg := d.digest(d.table(cols, rows...), version)
			if dg.Rows != int64(len(rows)) {
				d.t.Errorf("v%d %s: %d rows, want %d", version, name, dg.Rows, len(rows))
			}
			if other, ok := seen[dg.Checksum]; ok {
				d.t.Errorf("v%d (%s): %s and %s have the same checksum %s", version, cols, name, other, dg.Checksum)
			}
			seen[dg.Checksum] = name
		}
	}
}

// alike fails the test unless every case has the same checksum.
func (d *digester) alike(cols string, cases ...[]string) {
	d.t.Helper()
	var first refill.Digest
	for i, rows := range cases {
		dg := d.digest(d.table(cols, rows...), 2)
		if i == 0 {
			first = dg
		} else if dg != first {
			d.t.Errorf("(%s) %v: %v, want %v as for %v", cols, rows, dg, first, cases[0])
		}
	}
}

// The checksum proves that two builds of a partition hold the same rows:
// any change to the rows changes it, and row order does not.
func TestDigestTellsRowsApart(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	d.apart("k text, n bigint", map[string][]string{
		"rows":            {"'a', 1", "'b', 2"},
		"a changed value": {"'a', 1", "'b', 3"},
		"a duplicate row": {"'a', 1", "'b', 2", "'b', 2"},
		"two duplicates":  {"'a', 1", "'a', 1", "'b', 2", "'b', 2"},
		"a missing row":   {"'a', 1"},
		// The same values in each column, but not in the same rows.
		"swapped values": {"'a', 2", "'b', 1"},
		"none":           {},
	})
	d.alike("k text, n bigint", []string{"'a', 1", "'b', 2", "'c', NULL"}, []string{"'c', NULL", "'b', 2", "'a', 1"})
	// Rows of another partition do not count.
	other := d.table("k text", "'a'")
	d.exec("INSERT INTO " + other + " VALUES ('2026-11-02', 'b')")
	if got, want := d.digest(other, 2), d.digest(d.table("k text", "'a'"), 2); got != want {
		t.Errorf("with a row of another day: %v, want %v", got, want)
	}
}

// PostgreSQL's own 64-bit hash of a bigint folds it to 32 bits (1 and
// 4294967296 hash alike); the checksum keeps all 64.
func TestDigestKeepsEveryBitOfABigint(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	values := map[string][]string{}
	for _, v := range []string{"0", "1", "4294967296", "4294967297", "-1", "4294967295", "-4294967296", "9223372036854775807", "-9223372036854775808", "NULL"} {
		values[v] = []string{v}
	}
	d.apart("n bigint", values)
	d.exec("CREATE DOMAIN amount AS bigint")
	d.apart("n amount", map[string][]string{"1": {"1"}, "4294967296": {"4294967296"}})
	d.apart("n bigint, m bigint", map[string][]string{"1 2": {"1, 2"}, "2 1": {"2, 1"}, "1 4294967298": {"1, 4294967298"}})
}

// Values are hashed whole, one column at a time: no shifting of a boundary
// between two columns gives the same row.
func TestDigestKeepsColumnsApart(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	d.apart("a text, b text", map[string][]string{
		"ab c":   {"'ab', 'c'"},
		"a bc":   {"'a', 'bc'"},
		"abc -":  {"'abc', ''"},
		"- abc":  {"'', 'abc'"},
		"abc N":  {"'abc', NULL"},
		"N abc":  {"NULL, 'abc'"},
		"a b":    {"'a', 'b'"},
		"b a":    {"'b', 'a'"},
		"N N":    {"NULL, NULL"},
		"- -":    {"'', ''"},
		"N -":    {"NULL, ''"},
		"- N":    {"'', NULL"},
		"a\\tb":  {"E'a\\tb', ''"},
		"a,b":    {"'a,b', ''"},
		"quoted": {`'"a"', ''`},
	})
}

// NULL is no value of any type: not the empty string, not zero, not the
// epoch.
func TestDigestTellsNullFromZero(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	for typ, zero := range map[string]string{
		"text": "''", "varchar(5)": "''", "char(3)": "''", "integer": "0", "smallint": "0", "bigint": "0",
		"double precision": "0", "real": "0", "numeric": "0", "boolean": "false", "date": "'2000-01-01'",
		"timestamptz": "'2000-01-01 00:00:00+00'", "timestamp": "'2000-01-01 00:00:00'",
		"uuid": "'00000000-0000-0000-0000-000000000000'", "jsonb": "'null'", "integer[]": "'{}'", "interval": "'0'",
	} {
		d.apart("v "+typ, map[string][]string{"NULL": {"NULL"}, "zero": {zero}, "NULL and zero": {"NULL", zero}})
		d.apart("v "+typ+", w "+typ, map[string][]string{"NULL zero": {"NULL, " + zero}, "zero NULL": {zero + ", NULL"}, "zero zero": {zero + ", " + zero}})
	}
	// Nine nullable columns: NULLs past the first group of four count.
	cols := "a int, b int, c int, e int, f int, g int, h int, i int, j int"
	d.apart(cols, map[string][]string{
		"last NULL":  {"0, 0, 0, 0, 0, 0, 0, 0, NULL"},
		"first NULL": {"NULL, 0, 0, 0, 0, 0, 0, 0, 0"},
		"none":       {"0, 0, 0, 0, 0, 0, 0, 0, 0"},
		"all":        {"NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"},
	})
}

// Timestamps count to the microsecond, in any year, and at the instants
// where the hashes take a shortcut (the epoch of 2000).
func TestDigestKeepsEveryMicrosecond(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	for _, typ := range []string{"timestamptz", "timestamp"} {
		zone := ""
		if typ == "timestamptz" {
			zone = "+00"
		}
		values := map[string][]string{}
		for _, v := range []string{"2026-11-01 10:00:00.000001", "2026-11-01 10:00:00.000002", "2000-01-01 00:00:00", "2000-01-01 00:00:00.000001",
			"1799-12-31 23:59:59.999999", "1800-01-01 00:00:00", "2199-12-31 23:59:59.999999", "2200-01-01 00:00:00",
			"9999-12-31 23:59:59.999998", "9999-12-31 23:59:59.999999", "0001-01-01 00:00:00.000001", "0001-01-01 00:00:00.000002",
			"294276-12-31 23:59:59.999998", "294276-12-31 23:59:59.999999", "4713-11-24 00:00:00.000001 BC", "4713-11-24 00:00:00.000002 BC"} {
			values[v] = []string{"'" + v + zone + "'"}
		}
		values["infinity"] = []string{"'infinity'"}
		values["-infinity"] = []string{"'-infinity'"}
		values["NULL"] = []string{"NULL"}
		d.apart("v "+typ, values)
		// At the epoch the double's hash returns its seed as it is: the
		// column's own constant keeps the two orders apart.
		epoch, other := "'2000-01-01 00:00:00"+zone+"'", "'2026-11-01 10:00:00"+zone+"'"
		d.apart("v "+typ+", w "+typ, map[string][]string{"epoch first": {epoch + ", " + other}, "epoch last": {other + ", " + epoch}})
	}
	d.apart("v date", map[string][]string{
		"epoch": {"'2000-01-01'"}, "day": {"'2026-11-01'"}, "infinity": {"'infinity'"}, "-infinity": {"'-infinity'"},
		"first": {"'4713-01-01 BC'"}, "last": {"'5874897-12-31'"}, "NULL": {"NULL"},
	})
}

// Numbers count as written: sign, scale and the special values.
func TestDigestKeepsNumbersApart(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	values := map[string][]string{}
	for _, v := range []string{"1", "1.0", "1.00", "-1", "10000", "0.0001", "0", "-0.0", "'NaN'", "'Infinity'", "'-Infinity'", "NULL"} {
		values[v] = []string{v}
	}
	d.apart("v numeric", values)
	d.apart("v double precision, w double precision", map[string][]string{
		"0 1.5": {"0, 1.5"}, "1.5 0": {"1.5, 0"}, "N 1.5": {"NULL, 1.5"}, "1.5 N": {"1.5, NULL"},
		"0 0": {"0, 0"}, "N N": {"NULL, NULL"}, "NaN 0": {"'NaN', 0"}, "inf 0": {"'Infinity', 0"}, "1e-300 0": {"1e-300, 0"},
	})
	// As PostgreSQL compares them: -0 is 0.
	d.alike("v double precision", []string{"0"}, []string{"'-0'"})
}

// Text is hashed byte for byte, whatever the column's collation says is
// equal; char(n) is compared without its padding, as PostgreSQL does.
func TestDigestTextBytes(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	d.exec("CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
	d.apart("v text COLLATE ci", map[string][]string{"A": {"'A'"}, "a": {"'a'"}, "é": {"'é'"}, "e": {"'e'"}})
	d.exec("CREATE DOMAIN name_ci AS text COLLATE ci")
	d.apart("v name_ci", map[string][]string{"A": {"'A'"}, "a": {"'a'"}})
	d.apart("v varchar(10)", map[string][]string{"a": {"'a'"}, "a ": {"'a '"}})
	d.alike("v char(3)", []string{"'a'"}, []string{"'a  '"})
	d.apart("v jsonb, w interval, x integer[], y uuid, z boolean", map[string][]string{
		"1":  {`'{"a": 1}', '1 day', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
		"2":  {`'{"a": 2}', '1 day', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
		"3":  {`'{"a": 1}', '24 hours', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
		"4":  {`'{"a": 1}', '1 day', '{2,1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
		"5":  {`'{"a": 1}', '1 day', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', true`},
		"6":  {`'{"a": 1}', '1 day', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', false`},
		"7":  {`'{"a": 1}', '1 day', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', NULL`},
		"8":  {`'{"a": 1}', '1 day', '{1,NULL}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
		"9":  {`'{"a": 1}', '1 day', '{1,2}', NULL, true`},
		"10": {`'{"a": 1}', NULL, '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true`},
	})
}

// A snapshot is a copy made with CREATE TABLE AS, which drops NOT NULL
// constraints: the constraints must not change the checksum, which leaves
// NOT NULL columns out of its NULL bookkeeping.
func TestDigestIgnoresNotNull(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	name := d.table("id bigint NOT NULL, a text NOT NULL, b text, at timestamptz NOT NULL, f double precision, c int NOT NULL, e int, g int, h int, i int, j int NOT NULL",
		"1, 'x', NULL, '2026-11-01 10:00Z', 0, 1, NULL, 2, NULL, 4, 5",
		"2, '', 'y', '2000-01-01 00:00Z', NULL, 0, 3, NULL, NULL, NULL, 0")
	d.exec("CREATE TABLE copy AS SELECT * FROM " + name)
	if got, want := d.digest("copy", 2), d.digest(name, 2); got != want || got.Rows != 2 {
		t.Errorf("a copy without the NOT NULL constraints: %v, want %v", got, want)
	}
}

// Every column type the checksum hashes natively, and a wide table.
func TestDigestWideTable(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	types := []string{"text", "bigint", "integer", "timestamptz", "double precision", "numeric", "date", "boolean", "jsonb", "timestamp"}
	var cols, vals []string
	for i := range 600 {
		typ := types[i%len(types)]
		cols = append(cols, fmt.Sprintf("c%d %s", i, typ))
		vals = append(vals, "NULL")
	}
	name := d.table(strings.Join(cols, ", "), strings.Join(vals, ", "))
	d.exec("INSERT INTO " + name + " (day, c1) VALUES ('2026-11-01', 7)")
	if dg := d.digest(name, 2); dg.Rows != 2 {
		t.Errorf("600 columns: %v", dg)
	}
}

// Checksums stored before version 2 stay comparable: version 1 is still
// computed on request, exactly as before, and each version's result is
// pinned here, since changing how a version hashes would make every
// checksum stored with it look like a change.
func TestDigestVersions(t *testing.T) {
	t.Parallel()
	d := newDigester(t)
	ctx := t.Context()
	name := d.table("id bigint, who text, amount numeric, at timestamptz, f double precision, ok boolean",
		"1, 'ada', 12.50, '2026-11-01 10:00:00.123456+00', 0.1, true",
		"2, NULL, -3, '9999-12-31 23:59:59+00', NULL, false",
		"4294967296, '', 'NaN', NULL, 0, NULL")
	ref := refill.TableRef{Table: name, Column: "day", Grain: refill.GrainDay}

	v1, v2 := d.digest(name, 1), d.digest(name, 2)
	if current, err := d.w.Digest(ctx, ref, "2026-11-01"); err != nil || current != v2 {
		t.Errorf("Digest = %v, %v; want version 2, %v", current, err, v2)
	}
	const wantV1, wantV2 = "98ba4531fa12c911", "v2:ab0acfe444f6e6d9" // version 1 as refill computed it before version 2
	if v1.Checksum != wantV1 || v1.Version() != 1 || v2.Checksum != wantV2 || v2.Version() != 2 || v1.Rows != 3 || v2.Rows != 3 {
		t.Errorf("checksums %s and %s, want %s and %s: a version's checksums must never change", v1.Checksum, v2.Checksum, wantV1, wantV2)
	}
	// Version 1 is the sum of hashtextextended(row::text, 0), as it was.
	conn, err := d.w.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var sum string
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT sum(hashtextextended(r::text, 0))::text FROM "+name+" AS r").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "RESET TimeZone"); err != nil {
		t.Fatal(err)
	}
	s, _ := new(big.Int).SetString(sum, 10)
	if want := fmt.Sprintf("%016x", s.Mod(s, new(big.Int).Lsh(big.NewInt(1), 64)).Uint64()); v1.Checksum != want {
		t.Errorf("version 1 = %s, want %s", v1.Checksum, want)
	}

	// A stored digest is compared with one of its own version, in or out
	// of a transaction.
	if got, err := refill.DigestLike(ctx, d.w, ref, "2026-11-01", refill.Digest{Rows: 3, Checksum: wantV1}); err != nil || got != v1 {
		t.Errorf("DigestLike(a version 1 digest) = %v, %v; want %v", got, err, v1)
	}
	err = d.w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		for _, want := range []refill.Digest{v1, v2} {
			if got, err := refill.DigestLike(ctx, tx, ref, "2026-11-01", want); err != nil || got != want {
				t.Errorf("in a transaction, DigestLike(%v) = %v, %v", want, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{0, 3} {
		if _, err := d.w.DigestVersion(ctx, ref, "2026-11-01", v); !errors.Is(err, refill.ErrDigestVersion) {
			t.Errorf("version %d: error %v, want ErrDigestVersion", v, err)
		}
	}
	if _, err := refill.DigestLike(ctx, d.w, ref, "2026-11-01", refill.Digest{Checksum: "v3:0000000000000000"}); !errors.Is(err, refill.ErrDigestVersion) ||
		!strings.Contains(err.Error(), "v3:0000000000000000") {
		t.Errorf("a version 3 digest: error %v, want ErrDigestVersion naming it", err)
	}
}

// The settings that values print with are pinned for version 1 as for
// version 2 (TestDigestIgnoresSettings runs the current version).
func TestDigestVersion1IgnoresSettings(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	ctx := context.Background()
	var sums []string
	for i, tz := range []string{"Asia/Kolkata", "America/St_Johns"} {
		w, err := postgres.Open(ctx, dsn+"&timezone="+tz+"&DateStyle=SQL,DMY")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if i == 0 {
			if _, err := w.Pool().Exec(ctx, `CREATE TABLE t (day date, at timestamptz); INSERT INTO t VALUES ('2026-11-02', '2026-11-02 13:45:00.123456+00')`); err != nil {
				t.Fatal(err)
			}
		}
		dg, err := w.DigestVersion(ctx, refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}, "2026-11-02", 1)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, dg.Checksum)
	}
	if sums[0] != sums[1] {
		t.Errorf("version 1 under two time zones: %v", sums)
	}
}
