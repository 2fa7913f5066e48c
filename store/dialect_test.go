package store

import (
	"reflect"
	"testing"
)

func TestRebind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d        dialect
		in, want string
	}{
		{sqliteDialect, `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = ? AND c = ?`},
		{postgresDialect, `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{postgresDialect, `SELECT '?', ? WHERE x = 'it''s?' AND y = ?`, `SELECT '?', $1 WHERE x = 'it''s?' AND y = $2`},
		{postgresDialect, `SELECT 1`, `SELECT 1`},
	} {
		if got := c.d.rebind(c.in); got != c.want {
			t.Errorf("%s: rebind(%q) = %q, want %q", c.d.name, c.in, got, c.want)
		}
	}
}

// TestMigrationsMatch keeps the dialects' schemas in step: a version that
// exists for one engine only would leave the other silently behind.
func TestMigrationsMatch(t *testing.T) {
	t.Parallel()
	names := func(d dialect) []string {
		ms, err := d.migrations()
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("%s has no migrations", d.name)
		}
		var out []string
		for i, m := range ms {
			if m.version != i+1 {
				t.Errorf("%s: migration %d is version %d; versions run 1, 2, 3 … with no gaps", d.name, i+1, m.version)
			}
			out = append(out, m.name)
		}
		return out
	}
	if s, p := names(sqliteDialect), names(postgresDialect); !reflect.DeepEqual(s, p) {
		t.Fatalf("sqlite migrations %v, postgres migrations %v: want the same versions and names", s, p)
	}
}
