package sqlite

import (
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sqliteJulian asks the bundled SQLite for julianday(v) as an iJD.
func sqliteJulian(t testing.TB, db *sql.DB, v any) (int64, bool) {
	t.Helper()
	var jd sql.NullInt64
	if err := db.QueryRow("SELECT CAST(round(julianday(?1) * 86400000) AS INTEGER)", v).Scan(&jd); err != nil {
		t.Fatalf("julianday(%q): %v", v, err)
	}
	return jd.Int64, jd.Valid
}

func openMemory(t testing.TB) *sql.DB {
	t.Helper()
	w, err := Open(filepath.Join(t.TempDir(), "julian.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w.DB()
}

var julianSamples = []any{
	nil, int64(0), int64(2461000), 2461000.5, -1.0, 5373484.49, 5373484.5, int64(1730000000), []byte("2026-11-02"),
	"2026-11-02", "2026-11-02 13:45", "2026-11-02 13:45:00", "2026-11-02T13:45:00Z", "2026-11-02T13:45:00z",
	"2026-11-02 15:45:00+02:00", "2026-11-02 15:45:00 -05:30 ", "2026-11-02 13:45:00.5", "2026-11-02 13:45:00.123456",
	"2026-11-02 13:45:00.9999", "2026-11-02 13:45:59.9995", "2026-11-02TT  13:45", "2026-11-02 24:00", "2026-12-31 24:00:00",
	"2026-11-02 24:00:01", "2026-02-30", "2026-02-31 12:00", "2024-02-29", "0000-01-01", "-4713-11-24 12:00:00",
	"-4713-11-24 11:59:59", "-4714-01-01", "9999-12-31 23:59:59.999", "9999-12-31 24:00", "10000-01-01",
	"13:45", "13:45:30.25", "24:00", "24:00Z", "13:45+01:00", "2026-11-02 13:45:00+14:59", "2026-11-02 13:45:00+15:00",
	"2026-11-02 13:45:00+0200", "2026-11-02 13:45:00 Z ", "2026-11-02 13:45:00 X", "2026-11-02 1:45", "2026-1-02",
	"2026-11-02x", " 2026-11-02", "2026-11-02\x0013:00", "2461000.5", " 2461000.5 ", "+2461000", "-5", ".5", "5.", "1e3",
	"1e", "1e+", "2.4e6", "0x10", "inf", "NaN", "", " ", "garbage", "2026/11/02", "20261102", "2026-11-02T13:45:00.Z",
	"2026-11-02 13:45:00.", "2026-11-02 13:45:60", "2026-11-02 13:60", "2026-13-01", "2026-00-10", "2026-11-00",
	"2026-11-32", "2026-11-02\t13:45", "2026-11-02\n", "\u00a02026-11-02", "1970-01-01", "2026-11-02 23:59:59.9999999999",
}

// TestJulianMatchesSQLite holds julianMS to julianday() on the formats
// refill's users write and on the edges of SQLite's grammar.
func TestJulianMatchesSQLite(t *testing.T) {
	db := openMemory(t)
	for _, v := range julianSamples {
		want, wantOK := sqliteJulian(t, db, v)
		got, ok := julianMS(v, 0)
		if ok != wantOK || got != want {
			t.Errorf("julianMS(%#v) = %d, %v; SQLite says %d, %v", v, got, ok, want, wantOK)
		}
	}
	// Random text built from the pieces of timestamps.
	r := rand.New(rand.NewPCG(1, 2))
	frags := []string{"2026", "-", "11", "02", " ", "T", ":", "45", "00", ".", "5", "Z", "+", "02:00", "24", "99", "1", "0", "e", "\t", "-4713", "9999", "12", "31", "60"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(frags[r.IntN(len(frags))])
		}
		s := b.String()
		want, wantOK := sqliteJulian(t, db, s)
		got, ok := julianMS(s, 0)
		if ok != wantOK || got != want {
			t.Fatalf("julianMS(%q) = %d, %v; SQLite says %d, %v", s, got, ok, want, wantOK)
		}
	}
}

func TestJulianNow(t *testing.T) {
	db := openMemory(t)
	now := time.Now().UnixMilli() + unixEpochJulianMS
	for _, s := range []string{"now", "NOW", "subsec", "SubSecond"} {
		got, ok := julianMS(s, now)
		want, wantOK := sqliteJulian(t, db, s)
		if !ok || !wantOK || got != now || want < now-60000 || want > now+60000 {
			t.Errorf("julianMS(%q) = %d, %v; want now (%d), which SQLite reads as %d, %v", s, got, ok, now, want, wantOK)
		}
	}
	if _, ok := julianMS("ſubsec", now); ok {
		t.Error("a non-ASCII letter folded to ASCII")
	}
}

// FuzzJulian compares julianMS with SQLite's julianday on any text.
func FuzzJulian(f *testing.F) {
	for _, v := range julianSamples {
		if s, ok := v.(string); ok {
			f.Add(s)
		}
	}
	db := openMemory(f)
	f.Fuzz(func(t *testing.T, s string) {
		switch {
		case asciiEqualFold(s, "now"), asciiEqualFold(s, "subsec"), asciiEqualFold(s, "subsecond"):
			return // the clock, tested above
		}
		if len(strings.TrimLeft(s, " \t\n\v\f\r+-0")) > 19 && strings.Trim(s, " \t\n\v\f\r+-.0123456789eE") == "" {
			return // long mantissas: SQLite may round differently in the last bit
		}
		want, wantOK := sqliteJulian(t, db, s)
		got, ok := julianMS(s, 0)
		if ok != wantOK || got != want {
			t.Fatalf("julianMS(%q) = %d, %v; SQLite says %d, %v", s, got, ok, want, wantOK)
		}
	})
}
