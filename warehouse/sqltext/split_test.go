package sqltext

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func TestSplitStatements(t *testing.T) {
	both := []Dialect{SQLite, Postgres}
	tests := []struct {
		name     string
		dialects []Dialect
		in       string
		want     []string
	}{
		{"one", both, "DELETE FROM t", []string{"DELETE FROM t"}},
		{"two and a trailing semicolon", both, "DELETE FROM t; INSERT INTO t SELECT 1;", []string{"DELETE FROM t", " INSERT INTO t SELECT 1", ""}},
		{"semicolon in a string", both, "INSERT INTO t VALUES (';'); SELECT 1", []string{"INSERT INTO t VALUES (';')", " SELECT 1"}},
		{"semicolon in a quoted name", both, `SELECT 1 AS "a;b"; SELECT 2`, []string{`SELECT 1 AS "a;b"`, " SELECT 2"}},
		{"semicolon in comments", both, "SELECT 1 -- a; b\n; /* c; d */ SELECT 2", []string{"SELECT 1 -- a; b\n", " /* c; d */ SELECT 2"}},
		{"empty statements", both, ";;", []string{"", "", ""}},
		{"postgres dollar quoting", []Dialect{Postgres}, "DO $$ BEGIN PERFORM 1; END $$; SELECT 2", []string{"DO $$ BEGIN PERFORM 1; END $$", " SELECT 2"}},
		{"postgres tagged dollar quoting", []Dialect{Postgres}, "CREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $fn$ LANGUAGE sql; SELECT f()", []string{"CREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $fn$ LANGUAGE sql", " SELECT f()"}},
		{"postgres escape string", []Dialect{Postgres}, `SELECT E'\';'; SELECT 2`, []string{`SELECT E'\';'`, " SELECT 2"}},
		{"postgres nested comment", []Dialect{Postgres}, "/* a /* b */ ; */ SELECT 1; SELECT 2", []string{"/* a /* b */ ; */ SELECT 1", " SELECT 2"}},
		{"sqlite comments do not nest", []Dialect{SQLite}, "/* a /* b */ SELECT 1; SELECT 2 */", []string{"/* a /* b */ SELECT 1", " SELECT 2 */"}},
		{"sqlite bracket name", []Dialect{SQLite}, "SELECT 1 AS [a;b]; SELECT 2", []string{"SELECT 1 AS [a;b]", " SELECT 2"}},
		{"postgres brackets are code", []Dialect{Postgres}, "SELECT a[1]; SELECT 2", []string{"SELECT a[1]", " SELECT 2"}},
		{"sqlite trigger body", []Dialect{SQLite},
			"CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END; SELECT 1",
			[]string{"CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END", " SELECT 1"}},
		{"begin outside a trigger", []Dialect{SQLite}, "BEGIN; SELECT 1; END", []string{"BEGIN", " SELECT 1", " END"}},
		{"postgres begin atomic", []Dialect{Postgres},
			"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END; SELECT f()",
			[]string{"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END", " SELECT f()"}},
	}
	for _, tt := range tests {
		for _, d := range tt.dialects {
			got, unterminated := d.SplitStatements(tt.in)
			if !slices.Equal(got, tt.want) || unterminated != -1 {
				t.Errorf("%s/%s: SplitStatements(%q) = %q, %d; want %q, -1", tt.name, d, tt.in, got, unterminated, tt.want)
			}
		}
	}
	got, unterminated := Postgres.SplitStatements("SELECT 1; SELECT 'x; y")
	if want := []string{"SELECT 1", " SELECT 'x; y"}; !slices.Equal(got, want) || unterminated != 17 {
		t.Errorf("unterminated: SplitStatements = %q, %d; want %q, 17", got, unterminated, want)
	}
}

func TestStatements(t *testing.T) {
	got, err := SQLite.Statements("-- rebuild\nDELETE FROM t WHERE d = :partition;\n/* then */\nINSERT INTO t SELECT * FROM s WHERE d = :partition; -- done\n")
	want := []string{"-- rebuild\nDELETE FROM t WHERE d = :partition", "\n/* then */\nINSERT INTO t SELECT * FROM s WHERE d = :partition"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Statements = %q, %v; want %q", got, err, want)
	}

	// Statements splits; it does not judge. Transaction control reaches
	// the warehouse, which refuses it (see the drivers' tests).
	for sql, n := range map[string]int{
		"DELETE FROM t; COMMIT; DELETE FROM u":       3,
		"SAVEPOINT a; DELETE FROM t; ROLLBACK TO a":  3,
		"'COMMIT' ; SELECT 1":                        2,
		"/* COMMIT */ SELECT 1; -- trailing comment": 1,
	} {
		for _, d := range []Dialect{SQLite, Postgres} {
			if got, err := d.Statements(sql); err != nil || len(got) != n {
				t.Errorf("%s: Statements(%q) = %q, %v; want %d statements", d, sql, got, err, n)
			}
		}
	}

	bad := map[string]string{
		"-- nothing\n ; ": "empty",
		"SELECT 'x":       "unterminated",
	}
	for sql, want := range bad {
		for _, d := range []Dialect{SQLite, Postgres} {
			_, err := d.Statements(sql)
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Statements(%q): error = %v, want bad input mentioning %q", d, sql, err, want)
			}
		}
	}
}

func TestTransactionControl(t *testing.T) {
	for stmt, want := range map[string]string{
		"COMMIT":                              "COMMIT",
		"\n  /* x */ end transaction":         "END",
		"BEGIN IMMEDIATE":                     "BEGIN",
		"rollback work":                       "ROLLBACK",
		"ROLLBACK TRANSACTION TO SAVEPOINT a": "ROLLBACK TO",
		"ABORT":                               "ABORT",
		"START TRANSACTION":                   "START",
		"PREPARE TRANSACTION 'x'":             "PREPARE TRANSACTION",
		"savepoint a":                         "SAVEPOINT",
		"RELEASE a":                           "RELEASE",
		"'COMMIT'":                            "",
		"SELECT 1 AS commit":                  "",
		"PREPARE q AS SELECT 1":               "",
		"/* COMMIT */ SELECT 1":               "",
	} {
		if got := Postgres.TransactionControl(stmt); got != want {
			t.Errorf("TransactionControl(%q) = %q, want %q", stmt, got, want)
		}
	}
}

// FuzzSplitStatements checks properties that hold for any input: joining
// the pieces with the separators gives back the input exactly, so no text is
// lost or changed; a piece (other than an unterminated tail) splits into
// itself alone, so no separator was missed; and Statements returns a
// subsequence of the pieces, never a blank one.
func FuzzSplitStatements(f *testing.F) {
	for _, s := range []string{
		"DELETE FROM t WHERE d = :partition; INSERT INTO t SELECT * FROM s;",
		"SELECT ';', \";\", [;], `;` -- ;\n; /* ; /* ; */ ; */ ;",
		"DO $$ ; $$; SELECT $a$ ; $a$; SELECT E'\\';';",
		"CREATE TRIGGER x BEGIN SELECT CASE WHEN 1 THEN 2 END; END; COMMIT;",
		"CREATE FUNCTION f() BEGIN ATOMIC SELECT 1; END; ROLLBACK TO a",
		"'unterminated ;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		for _, d := range []Dialect{SQLite, Postgres, DuckDB} {
			d.WriteTarget(sql)
			d.Calls(sql, "query")
			pieces, unterminated := d.SplitStatements(sql)
			if got := strings.Join(pieces, ";"); got != sql {
				t.Fatalf("%s: joined pieces %q, want %q", d, got, sql)
			}
			for i, p := range pieces {
				if i == len(pieces)-1 && unterminated >= 0 {
					break
				}
				if again, _ := d.SplitStatements(p); len(again) != 1 {
					t.Fatalf("%s: piece %q of %q splits again into %q", d, p, sql, again)
				}
			}
			stmts, err := d.Statements(sql)
			if err != nil {
				if !errors.Is(err, refill.ErrBadInput) {
					t.Fatalf("%s: Statements(%q): error %v is not bad input", d, sql, err)
				}
				continue
			}
			j := 0
			for _, s := range stmts {
				for j < len(pieces) && pieces[j] != s {
					j++
				}
				if j == len(pieces) {
					t.Fatalf("%s: statement %q is not one of the pieces %q in order", d, s, pieces)
				}
				j++
				if _, first := d.leadingWords(s, 1); first < 0 {
					t.Fatalf("%s: statement %q is blank", d, s)
				}
			}
		}
	})
}

func TestWriteTarget(t *testing.T) {
	for stmt, want := range map[string]string{
		"INSERT INTO revenue_daily (day) VALUES (1)":                                       "revenue_daily",
		"insert or replace into main.\"Revenue\" select 1":                                 `main."Revenue"`,
		"WITH x AS (DELETE FROM billing RETURNING 1) INSERT INTO t SELECT * FROM x":        "t",
		"WITH x AS (SELECT 1), y AS (SELECT 2) UPDATE ONLY w.s . t SET a = 1 FROM billing": "w.s.t",
		"/* UPDATE billing */ DELETE FROM \"a.b\" WHERE x IN (SELECT 1 FROM billing)":      `"a.b"`,
		"-- INSERT INTO billing\nDELETE FROM t USING billing":                              "t",
		`UPDATE "we ird"."a""b" SET x = 1`:                                                 `"we ird"."a""b"`,
		"SELECT 'UPDATE billing'":                                                          "",
		"DELETE revenue_daily":                                                             "",
		"INSERT INTO (SELECT 1)":                                                           "",
		"UPDATE":                                                                           "",
	} {
		got, ok := DuckDB.WriteTarget(stmt)
		if got != want || ok != (want != "") {
			t.Errorf("WriteTarget(%q) = %q, %v; want %q", stmt, got, ok, want)
		}
	}
}

func TestCalls(t *testing.T) {
	for stmt, want := range map[string]string{
		"SELECT * FROM query('SELECT 1')":                 "query",
		"SELECT * FROM main.QUERY ('x')":                  "query",
		`SELECT * FROM "Query_Table"('refill_published')`: "query_table",
		"SELECT query FROM t":                             "",
		"SELECT 'query(' FROM t":                          "",
		"SELECT 1 -- query(\n":                            "",
		"SELECT 1 -- \rFROM query('x')":                   "query",
		"SELECT * FROM my_query('x')":                     "",
	} {
		got, ok := DuckDB.Calls(stmt, "query", "query_table")
		if got != want || ok != (want != "") {
			t.Errorf("Calls(%q) = %q, %v; want %q", stmt, got, ok, want)
		}
	}
	// A carriage return ends a line comment on PostgreSQL and DuckDB, not
	// on SQLite, as each engine's scanner reads it.
	if got, _ := DuckDB.WriteTarget("UPDATE -- \rbilling AS\nrevenue_daily SET x = 1"); got != "billing" {
		t.Errorf("DuckDB write target after a comment ended by \\r: %q, want billing", got)
	}
	if pieces, _ := SQLite.SplitStatements("SELECT 1 -- a\r; b"); len(pieces) != 1 {
		t.Errorf("SQLite split at a semicolon inside a line comment: %q", pieces)
	}
	if pieces, _ := Postgres.SplitStatements("SELECT 1 -- a\r; SELECT 2"); len(pieces) != 2 {
		t.Errorf("PostgreSQL did not split after a comment ended by \\r: %q", pieces)
	}
}
