package sqltext

import (
	"errors"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
)

// SplitStatements cuts sql at every semicolon that is code, by the dialect's
// lexical rules: a semicolon inside a string literal, quoted identifier,
// comment or Postgres dollar-quoted body does not end a statement, and
// neither does one inside a SQLite CREATE TRIGGER body or a Postgres
// BEGIN ATOMIC function body, which the database reads, up to their END, as
// part of one statement.
//
// The pieces are returned verbatim and all of them, blank ones included, so
// that strings.Join(pieces, ";") == sql: nothing the user wrote is dropped or
// rewritten. unterminated is the byte offset at which an unclosed literal or
// comment starts, or -1; the text from there on is in the last piece.
func (d Dialect) SplitStatements(sql string) (pieces []string, unterminated int) {
	start := 0
	var b body
	unterminated = d.scan(sql, func(i int) int {
		c := sql[i]
		switch {
		case c == ';' && !b.open:
			pieces = append(pieces, sql[start:i])
			start = i + 1
			b = body{}
		case isWordStart(sql, i):
			end := wordEnd(sql, i)
			b.word(d, strings.ToUpper(sql[i:end]))
			return end - i - 1
		case !isSpace(c):
			b.prev = ""
		}
		return 0
	})
	return append(pieces, sql[start:]), unterminated
}

// body follows just enough of a statement's words to know whether a
// semicolon is inside a body that the database reads as part of the one
// statement: a SQLite trigger (CREATE [TEMP] TRIGGER ... BEGIN ...; END) or
// a Postgres SQL-standard function body (BEGIN ATOMIC ...; END). Bodies hold
// CASE expressions, whose END does not close the body, so CASE ... END pairs
// are counted.
type body struct {
	words   int    // words seen in the statement
	trigger bool   // the statement is CREATE [TEMP|TEMPORARY] TRIGGER
	open    bool   // inside BEGIN [ATOMIC] ... END
	cases   int    // open CASE expressions inside the body
	prev    string // the previous word, if nothing but blanks came since
}

func (b *body) word(d Dialect, w string) {
	b.words++
	switch {
	case b.open && w == "CASE":
		b.cases++
	case b.open && w == "END":
		if b.cases > 0 {
			b.cases--
		} else {
			b.open = false
		}
	case b.open:
	case d.bracketIdents && b.words <= 3 && w == "TRIGGER" && (b.prev == "CREATE" || b.prev == "TEMP" || b.prev == "TEMPORARY"):
		b.trigger = true
	case d.bracketIdents && b.trigger && w == "BEGIN":
		b.open = true
	case d.postgresStrings && w == "ATOMIC" && b.prev == "BEGIN":
		b.open = true
	}
	b.prev = w
}

// isWordStart reports whether sql[i] starts a word: an unquoted identifier
// or keyword. A $ starts a parameter ($1, $name), not a word.
func isWordStart(sql string, i int) bool {
	c := sql[i]
	return isIdentByte(c) && c != '$' && (c < '0' || c > '9') && (i == 0 || !isIdentByte(sql[i-1]))
}

// wordEnd returns the offset just after the word starting at sql[i].
func wordEnd(sql string, i int) int {
	end := i + 1
	for end < len(sql) && isIdentByte(sql[end]) {
		end++
	}
	return end
}

// Statements splits an sql job into the statements to run, in order,
// leaving out pieces that hold only blanks and comments, so that a failure
// can name the statement that failed.
//
// It refuses, as bad input, text with an unclosed literal or comment and
// text with no statement at all. It does not decide what a statement may
// do: a hand-written lexer can be fooled (SQLite reads
// "SELECT temp trigger, 1 AS begin ...; COMMIT; ..." as one statement here
// but as three itself), so each driver has the warehouse engine refuse
// transaction control, whatever the pieces look like.
func (d Dialect) Statements(sql string) ([]string, error) {
	pieces, unterminated := d.SplitStatements(sql)
	if unterminated >= 0 {
		return nil, refill.BadInputf("sql has an unterminated string, quoted name or comment starting at %s", position(sql, unterminated))
	}
	var out []string
	for _, p := range pieces {
		if _, first := d.leadingWords(p, 0); first < 0 {
			continue // only blanks and comments
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, refill.BadInputf("sql is empty")
	}
	return out, nil
}

// TransactionControl returns the command a statement starts with if it
// begins, ends or marks a point in a transaction (BEGIN, START, COMMIT, END,
// ABORT, ROLLBACK, SAVEPOINT, RELEASE, PREPARE TRANSACTION), or "". It puts
// in words a statement the warehouse refused, and lets a driver refuse such
// a statement before any of a job runs (RefuseTransactionControl); it is
// not what keeps a job inside refill's transaction.
func (d Dialect) TransactionControl(stmt string) string {
	words, _ := d.leadingWords(stmt, 3)
	if len(words) == 0 {
		return ""
	}
	switch words[0] {
	case "BEGIN", "START", "COMMIT", "END", "ABORT", "SAVEPOINT", "RELEASE":
		return words[0]
	case "ROLLBACK":
		if len(words) > 1 && words[1] == "TO" || len(words) > 2 && (words[1] == "TRANSACTION" || words[1] == "WORK") && words[2] == "TO" {
			return "ROLLBACK TO"
		}
		return "ROLLBACK"
	case "PREPARE":
		if len(words) > 1 && words[1] == "TRANSACTION" {
			return "PREPARE TRANSACTION"
		}
	}
	return ""
}

// leadingWords returns up to n leading words of stmt, upper-cased, skipping
// blanks and comments, and the offset of its first code: a word, a
// punctuation mark or a literal (-1 if stmt holds only blanks and comments).
// Anything but a word ends the words.
func (d Dialect) leadingWords(stmt string, n int) (words []string, first int) {
	first = -1
	stopped := false
	d.lex(stmt, func(i int) int {
		rest := len(stmt) - i - 1
		switch {
		case stopped:
			return rest
		case isSpace(stmt[i]):
			return 0
		case first < 0:
			first = i
		}
		if len(words) == n || !isWordStart(stmt, i) {
			stopped = true
			return rest
		}
		end := wordEnd(stmt, i)
		words = append(words, strings.ToUpper(stmt[i:end]))
		return end - i - 1
	}, func(start, _ int, comment bool) {
		if comment || stopped {
			return
		}
		if first < 0 {
			first = start
		}
		stopped = true
	})
	return words, first
}

// Excerpt shortens a statement for an error message: its first line of
// code (after any leading comments), at most 60 bytes.
func (d Dialect) Excerpt(stmt string) string {
	if _, first := d.leadingWords(stmt, 0); first > 0 {
		stmt = stmt[first:]
	}
	stmt = strings.TrimSpace(stmt)
	if i := strings.IndexByte(stmt, '\n'); i >= 0 {
		stmt = strings.TrimSpace(stmt[:i]) + " ..."
	}
	if len(stmt) > 60 {
		cut := 57
		for cut > 0 && stmt[cut]&0xc0 == 0x80 {
			cut-- // not inside a UTF-8 character
		}
		stmt = stmt[:cut] + "..."
	}
	return stmt
}

// StatementError is a statement of an sql job that the warehouse refused.
// It is the job's failure, not bad input: the job's SQL reached the
// warehouse, which is where its problems show.
type StatementError struct {
	// N is the statement's number (1-based) among Of statements.
	N, Of     int
	Partition string
	// SQL is an excerpt of the statement.
	SQL string
	// Err is the driver's error.
	Err error
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("sql job statement %d of %d (%s) failed for partition %s: %v", e.N, e.Of, e.SQL, e.Partition, e.Err)
}

// Unwrap lets errors.As reach the driver's error.
func (e *StatementError) Unwrap() error { return e.Err }

// RefusedError is job text the warehouse refused to run because it tried
// what refill never lets a job do: end or control refill's transaction,
// attach another database, change the connection's settings, load code
// into the warehouse, change the schema, read refill's own tables, write a
// table other than its own or, for a query job, write at all. The warehouse
// engine decided (SQLite's authorizer, PostgreSQL's refusal to commit
// inside a DO block, its per-transaction statistics); this error puts its
// refusal in words. It wraps refill.ErrBadInput: the job's text has to
// change.
type RefusedError struct {
	Partition string
	// Table is the table the job builds, "" when there is none (a query
	// being counted).
	Table string
	// SQL is an excerpt of the statement refused, "" when unknown.
	SQL string
	// What is what the job tried, completing "the job tried to ...":
	// "control the transaction (COMMIT)", "attach a database (x.db)",
	// "write table billing".
	What string
	// Rule is the rule What breaks, completing "which refill refuses: ...";
	// "" is the rule about refill's transaction.
	Rule string
	// Err is the warehouse's own error.
	Err error
}

// The rules a RefusedError names, completing "which refill refuses: ...".
// Every driver refuses the same things for the same reasons, so the words
// live here.
const (
	// ruleTransaction is the rule every job keeps, the one a RefusedError
	// without a Rule names.
	ruleTransaction = "a job runs inside refill's own transaction, may not end, control or leave it, and may use only the warehouse"
	// RuleOwnTable is why an sql job may write no table but its own: it
	// rebuilds one partition of one table.
	RuleOwnTable = "an sql job writes only its own table, and only the partition it builds"
	// RuleQueryJob is why a query job may not write: refill writes its
	// rows.
	RuleQueryJob = "a query job only reads, and refill writes its rows"
	// RuleSchema is why job text may hold no DDL.
	RuleSchema = "a job changes rows, never the schema: a table, index, trigger, view or function it made, altered or dropped would outlive it, fire later, or differ between the builds of a proof"
	// RuleOwnTables is why no job may read or write refill's bookkeeping
	// (refill_published, refill_audit_anchor, snapshots).
	RuleOwnTables = "refill's own tables are no job's business: a job must build the same rows in a proof as in a real apply, and never touch refill's records"
)

func (e *RefusedError) Error() string {
	of, stmt, rule := "", "", e.Rule
	if e.Table != "" {
		of = " of " + e.Table
	}
	if e.SQL != "" {
		stmt = fmt.Sprintf(" in %q", e.SQL)
	}
	if rule == "" {
		rule = ruleTransaction
	}
	return fmt.Sprintf("the job for partition %s%s tried to %s%s, which refill refuses: %s (%v)", e.Partition, of, e.What, stmt, rule, e.Err)
}

// Unwrap lets errors.Is find refill.ErrBadInput and errors.As the driver's
// error.
func (e *RefusedError) Unwrap() []error { return []error{refill.ErrBadInput, e.Err} }

// errNotRun is the cause of a refusal made before any of a job ran.
var errNotRun = errors.New("refused before any of the job's statements ran")

// RefuseTransactionControl returns a *RefusedError for the first of an sql
// job's statements that begins, ends or marks a point in a transaction, or
// nil. A driver asks before it runs any statement, so that such a job is
// refused for what it is, and not for whatever an earlier statement did
// first (a DELETE of a whole table fails on the partition guard long before
// the COMMIT behind it would reach the warehouse). It is a courtesy, not a
// guard: a statement it misses is still refused by the warehouse engine
// itself, as the package comment explains.
func (d Dialect) RefuseTransactionControl(stmts []string, table, partition string) error {
	for _, s := range stmts {
		if what := d.TransactionControl(s); what != "" {
			return &RefusedError{Partition: partition, Table: table, SQL: d.Excerpt(s), What: "control the transaction (" + what + ")", Err: errNotRun}
		}
	}
	return nil
}

// WriteTarget returns the table name a data-changing statement writes, as
// written (qualified or quoted as it is): the name after INSERT ... INTO,
// UPDATE [ONLY] or DELETE FROM at the statement's top level, past any WITH
// clause, whose queries are in parentheses. ok is false when the statement
// is none of those or the name cannot be found; a driver that relies on it
// checks the statement's kind with the engine first, and refuses a
// statement whose target it cannot name.
func (d Dialect) WriteTarget(stmt string) (string, bool) {
	type token struct {
		start, end int
		word       string // upper-cased word, "" for anything else
	}
	var toks []token
	depth := 0
	d.lex(stmt, func(i int) int {
		c := stmt[i]
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth != 0 || isSpace(c):
		case isWordStart(stmt, i):
			end := wordEnd(stmt, i)
			toks = append(toks, token{i, end, strings.ToUpper(stmt[i:end])})
			return end - i - 1
		default:
			toks = append(toks, token{i, i + 1, ""})
		}
		return 0
	}, func(start, end int, comment bool) {
		if !comment && depth == 0 {
			toks = append(toks, token{start, end, ""})
		}
	})
	at := -1
	for i, t := range toks {
		switch t.word {
		case "INSERT":
			for j := i + 1; j < len(toks) && at < 0; j++ {
				if toks[j].word == "INTO" {
					at = j + 1
				}
			}
		case "UPDATE":
			at = i + 1
		case "DELETE":
			if i+1 < len(toks) && toks[i+1].word == "FROM" {
				at = i + 2
			}
		default:
			continue
		}
		break
	}
	if at >= 0 && at < len(toks) && toks[at].word == "ONLY" {
		at++
	}
	if at < 0 || at >= len(toks) {
		return "", false
	}
	// The name is parts (words or quoted names) joined by dots.
	var name strings.Builder
	for j := at; j < len(toks); j += 2 {
		t := toks[j]
		if t.word == "" && stmt[t.start] != '"' {
			break
		}
		name.WriteString(stmt[t.start:t.end])
		if j+1 >= len(toks) || stmt[toks[j+1].start:toks[j+1].end] != "." {
			break
		}
		name.WriteByte('.')
	}
	if name.Len() == 0 || strings.HasSuffix(name.String(), ".") {
		return "", false
	}
	return name.String(), true
}

// Calls returns the first of names (lower case) that stmt calls as a
// function: the name as a word or a quoted name, qualified or not,
// followed by an opening parenthesis, in code. A driver refuses calls it
// cannot judge from the plan (DuckDB's query(), which its binder replaces
// by the query it was given).
func (d Dialect) Calls(stmt string, names ...string) (string, bool) {
	var prev string // the last name seen, lower case, if nothing but blanks since
	found := ""
	d.lex(stmt, func(i int) int {
		if found != "" {
			return len(stmt) - i - 1
		}
		c := stmt[i]
		switch {
		case isSpace(c):
			return 0
		case c == '(' && prev != "":
			for _, n := range names {
				if prev == n {
					found = n
				}
			}
		case isWordStart(stmt, i):
			end := wordEnd(stmt, i)
			prev = strings.ToLower(stmt[i:end])
			return end - i - 1
		}
		prev = ""
		return 0
	}, func(start, end int, comment bool) {
		if comment {
			return
		}
		if stmt[start] == '"' {
			prev = strings.ToLower(strings.ReplaceAll(stmt[start+1:end-1], `""`, `"`))
		} else {
			prev = ""
		}
	})
	return found, found != ""
}
