package sqltext

import (
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"orders":        `"orders"`,
		"order":         `"order"`,
		"analytics.day": `"analytics"."day"`,
		`we"ird`:        `"we""ird"`,
		"Mixed":         `"Mixed"`,
	} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBindPartition(t *testing.T) {
	both := []Dialect{SQLite, Postgres}
	tests := []struct {
		name     string
		dialects []Dialect
		in, want string
	}{
		{"plain", both, "SELECT * FROM t WHERE d = :partition", "SELECT * FROM t WHERE d = $P"},
		{"twice", both, "WHERE d >= :partition AND d < :partition", "WHERE d >= $P AND d < $P"},
		{"at start and end", both, ":partition", "$P"},
		{"followed by a cast", both, "WHERE d = :partition::date", "WHERE d = $P::date"},
		{"a cast is not a parameter", both, "SELECT x::partition FROM t", "SELECT x::partition FROM t"},
		{"longer word", both, "WHERE d = :partitions OR d = :partition_key", "WHERE d = :partitions OR d = :partition_key"},
		{"followed by punctuation", both, "f(:partition),:partition)", "f($P),$P)"},
		{"in a string", both, "WHERE note = ':partition' AND d = :partition", "WHERE note = ':partition' AND d = $P"},
		{"doubled quote in a string", both, "WHERE n = 'it''s :partition' AND d = :partition", "WHERE n = 'it''s :partition' AND d = $P"},
		{"in a quoted identifier", both, `SELECT ":partition" FROM t WHERE d = :partition`, `SELECT ":partition" FROM t WHERE d = $P`},
		{"in a line comment", both, "SELECT 1 -- :partition\nWHERE d = :partition", "SELECT 1 -- :partition\nWHERE d = $P"},
		{"in a block comment", both, "SELECT /* :partition */ :partition", "SELECT /* :partition */ $P"},
		{"upper case is another word", both, "WHERE d = :PARTITION", "WHERE d = :PARTITION"},
		{"postgres dollar string", []Dialect{Postgres}, "SELECT $$ :partition $$, :partition", "SELECT $$ :partition $$, $P"},
		{"postgres tagged dollar string", []Dialect{Postgres}, "SELECT $x$ :partition $$ $x$, :partition", "SELECT $x$ :partition $$ $x$, $P"},
		{"postgres positional parameter", []Dialect{Postgres}, "SELECT $1, :partition", "SELECT $1, $P"},
		{"postgres escape string", []Dialect{Postgres}, `SELECT E'\' :partition', :partition`, `SELECT E'\' :partition', $P`},
		{"postgres nested comment", []Dialect{Postgres}, "/* a /* b */ :partition */ :partition", "/* a /* b */ :partition */ $P"},
		{"sqlite comments do not nest", []Dialect{SQLite}, "/* a /* b */ :partition", "/* a /* b */ $P"},
		{"sqlite bracket identifier", []Dialect{SQLite}, "SELECT [:partition], :partition", "SELECT [:partition], $P"},
		{"sqlite backquoted identifier", []Dialect{SQLite}, "SELECT `:partition`, :partition", "SELECT `:partition`, $P"},
		{"postgres array slice is code", []Dialect{Postgres}, "SELECT a[1:2], :partition", "SELECT a[1:2], $P"},
	}
	for _, tt := range tests {
		for _, d := range tt.dialects {
			got, n := d.BindPartition(tt.in, "$P")
			if got != tt.want {
				t.Errorf("%s/%s: BindPartition(%q) = %q, want %q", tt.name, d, tt.in, got, tt.want)
			}
			if want := strings.Count(tt.want, "$P"); n != want {
				t.Errorf("%s/%s: replaced %d, want %d", tt.name, d, n, want)
			}
		}
	}
}

func TestSubquery(t *testing.T) {
	ok := []struct {
		name     string
		d        Dialect
		in, want string
	}{
		{"plain", SQLite, "SELECT 1", "SELECT 1"},
		{"trailing semicolon and blanks", Postgres, "SELECT 1;\n  ", "SELECT 1"},
		{"trailing semicolons and a comment", SQLite, "SELECT 1; ; -- done\n", "SELECT 1    -- done"},
		{"semicolon in a string", Postgres, "SELECT ';'", "SELECT ';'"},
		{"semicolon in a comment", SQLite, "SELECT 1 /* ; */", "SELECT 1 /* ; */"},
		{"parentheses in a string", SQLite, "SELECT ')'", "SELECT ')'"},
		{"with", Postgres, "WITH x AS (SELECT 1) SELECT * FROM x", "WITH x AS (SELECT 1) SELECT * FROM x"},
	}
	for _, tt := range ok {
		got, err := tt.d.Subquery(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("%s: Subquery(%q) = %q, %v; want %q", tt.name, tt.in, got, err, tt.want)
		}
	}

	bad := []struct {
		name, in string
		d        Dialect
		want     string
	}{
		{"two statements", "SELECT 1; DELETE FROM t", SQLite, "more than one statement"},
		{"escape from the wrapper", "SELECT 1) q; DELETE FROM t; SELECT * FROM (SELECT 1", Postgres, "unmatched"},
		{"second statement", "SELECT 1 FROM t WHERE (a); DELETE FROM t", Postgres, "more than one statement"},
		{"unmatched parenthesis", "SELECT 1) q UNION ALL SELECT 1, (SELECT 1", SQLite, "unmatched"},
		{"unclosed parenthesis", "SELECT (1", SQLite, "unclosed"},
		{"unterminated string", "SELECT 'x", Postgres, "unterminated"},
		{"unterminated comment", "SELECT 1 /* x", SQLite, "unterminated"},
		// SQLite reads [a'b] as a name, so the ; between is code: a lexer
		// that saw a string from ' to ' here would let DELETE through.
		{"sqlite bracket hides a quote", "SELECT 1 AS [a'b]; COMMIT; DELETE FROM t; SELECT 1 AS [c'd]", SQLite, "more than one statement"},
		// SQLite comments do not nest: the ; is code for SQLite.
		{"sqlite comments do not nest", "SELECT 1 /* /* */ ; DELETE FROM t /* */", SQLite, "more than one statement"},
		{"empty", "  -- nothing\n", Postgres, "empty"},
	}
	for _, tt := range bad {
		_, err := tt.d.Subquery(tt.in)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Subquery(%q) error = %v, want bad input mentioning %q", tt.name, tt.in, err, tt.want)
		}
	}
}

func TestSubqueryPosition(t *testing.T) {
	_, err := SQLite.Subquery("SELECT 1\nFROM t;\nDELETE FROM t")
	if err == nil || !strings.Contains(err.Error(), "line 2, column 7") {
		t.Fatalf("error = %v, want it to point at line 2, column 7", err)
	}
}

func TestCountEach(t *testing.T) {
	stmt, params, err := Postgres.CountEach("SELECT * FROM t WHERE d = :partition::date; -- one day\n", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT 0 AS i, count(*) AS n FROM (\nSELECT * FROM t WHERE d = $1::date  -- one day\n) AS q" +
		"\nUNION ALL\n" +
		"SELECT 1 AS i, count(*) AS n FROM (\nSELECT * FROM t WHERE d = $2::date  -- one day\n) AS q"
	if stmt != want || params != 2 {
		t.Errorf("CountEach = %q, %d\nwant %q, 2", stmt, params, want)
	}

	_, params, err = SQLite.CountEach("SELECT 1", 3)
	if err != nil || params != 0 {
		t.Errorf("CountEach without :partition = %d params, %v; want 0, nil", params, err)
	}
	if _, _, err := SQLite.CountEach("SELECT 1; SELECT 2", 1); !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("CountEach of two statements: error = %v, want bad input", err)
	}
}

func TestQueryError(t *testing.T) {
	driver := errors.New("no such column: nope")
	err := error(&QueryError{Partition: "2026-11-01", Err: driver})
	if !errors.Is(err, refill.ErrBadInput) || !errors.Is(err, driver) {
		t.Errorf("QueryError does not wrap both bad input and the driver's error")
	}
	if msg := err.Error(); !strings.Contains(msg, "2026-11-01") || !strings.Contains(msg, "nope") {
		t.Errorf("message %q should name the partition and carry the driver's message", msg)
	}
}

// FuzzBindPartition checks the binder against properties that hold for any
// input: replacing the placeholders back gives the input, and every
// replacement was a whole-word :partition that is not the tail of a cast.
// Subquery must not panic on the same input.
func FuzzBindPartition(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM t WHERE d = :partition",
		"SELECT x::partition, ':partition', \":partition\" -- :partition\n, :partition",
		"/* /* :partition */ :partition */ :partition",
		"SELECT $$:partition$$, $a$ :partition $a$, $1, E'\\':partition', [:partition], `:partition`",
		":partition:partition ::partition :::partition :partitions",
		"SELECT 1; DELETE FROM t; SELECT (';'",
		"'unterminated :partition",
	} {
		f.Add(s)
	}
	const mark = "\x00"
	f.Fuzz(func(t *testing.T, sql string) {
		if strings.Contains(sql, mark) {
			return
		}
		for _, d := range []Dialect{SQLite, Postgres} {
			_, _ = d.Subquery(sql)
			out, n := d.BindPartition(sql, mark)
			if got := strings.Count(out, mark); got != n {
				t.Fatalf("%s: reported %d replacements, output has %d", d, n, got)
			}
			if back := strings.ReplaceAll(out, mark, PartitionParam); back != sql {
				t.Fatalf("%s: undoing the replacements gives %q, want %q", d, back, sql)
			}
			shift := 0
			for j := 0; j < len(out); j++ {
				if out[j] != mark[0] {
					continue
				}
				i := j + shift // offset of the replaced :partition in sql
				shift += len(PartitionParam) - len(mark)
				if i > 0 && sql[i-1] == ':' {
					t.Fatalf("%s: replaced the tail of a cast at %d in %q", d, i, sql)
				}
				if end := i + len(PartitionParam); end < len(sql) && isIdentByte(sql[end]) {
					t.Fatalf("%s: replaced part of a longer word at %d in %q", d, i, sql)
				}
			}
		}
	})
}
