package sqlite

import (
	"database/sql/driver"
	"path/filepath"
	"testing"

	"github.com/refill-dev/refill"
)

// Values are length-prefixed as well as tagged: without the lengths, text
// holding a tag byte could shift a boundary between values.
func TestRowHashSeparatesValues(t *testing.T) {
	rows := [][]driver.Value{
		{"a\x04", "b"}, {"a", "\x04b"}, {"ab", ""}, {"a", "b"}, {"", "ab"},
		{nil}, {""}, {int64(0)}, {0.0}, {[]byte{}}, {[]byte("a")}, {"a"},
		{int64(1), nil}, {nil, int64(1)}, {int64(1)}, {1.0},
	}
	seen := map[uint64]int{}
	for i, r := range rows {
		h := rowHash(r)
		if j, ok := seen[h]; ok {
			t.Errorf("rows %#v and %#v hash alike", rows[j], r)
		}
		seen[h] = i
	}
	if rowHash([]driver.Value{-0.0}) != rowHash([]driver.Value{0.0}) {
		t.Error("-0 and 0 hash differently")
	}
}

// Text is hashed whole, past a NUL byte, and text and blobs differ.
func TestDigestNULAndBlob(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	for _, q := range []string{
		"CREATE TABLE a (day TEXT, v)", "CREATE TABLE b (day TEXT, v)", "CREATE TABLE c (day TEXT, v)",
		"INSERT INTO a VALUES ('2026-11-02', 'x' || char(0) || 'y')",
		"INSERT INTO b VALUES ('2026-11-02', 'x' || char(0) || 'z')",
		"INSERT INTO c VALUES ('2026-11-02', CAST('x' AS BLOB))",
	} {
		if _, err := w.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sums := map[string]string{}
	for _, table := range []string{"a", "b", "c"} {
		d, err := w.Digest(ctx, refill.TableRef{Table: table, Column: "day", Grain: refill.GrainDay}, "2026-11-02")
		if err != nil || d.Rows != 1 {
			t.Fatalf("Digest(%s) = %v, %v", table, d, err)
		}
		if other, ok := sums[d.Checksum]; ok {
			t.Errorf("tables %s and %s have the same checksum", other, table)
		}
		sums[d.Checksum] = table
	}
}
