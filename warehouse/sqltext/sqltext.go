// Package sqltext holds the few pieces of SQL text handling that every
// warehouse driver needs: quoting identifiers from the config, binding a job's
// :partition parameter to the dialect's placeholder, and wrapping a user's
// query so the warehouse can count its rows without running anything else.
//
// The rules live in one place, with a fuzz target, because they sit between a
// user's SQL and the warehouse: a binder that rewrote a Postgres cast
// (x::date) or a word inside a string literal would silently change a query,
// and a wrapper that let a second statement through would count the wrong
// rows. What a job may do is not enforced here: each driver has the
// warehouse engine itself keep job text inside refill's transaction (SQLite's
// authorizer, PostgreSQL's DO blocks and extended protocol), because a lexer
// that guesses where statements end can be fooled.
package sqltext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/refill-dev/refill"
)

// PartitionParam is the named parameter a job's SQL uses for the partition
// being rebuilt (docs/design.md §6).
const PartitionParam = ":partition"

// QuoteIdent quotes a name exactly as the engine stores it, such as a
// column name Columns returned, for either dialect. A dotted name
// (schema.table) has each part quoted on its own, so that it still names a
// table in another schema rather than one table with a dot in its name.
// Embedded double quotes are doubled, so no name can end the quoting early.
//
// A name from the config is not stored as written: Events is events on
// PostgreSQL, and '"Events"' is Events. Dialect.QuoteName renders those.
func QuoteIdent(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = quotePart(p)
	}
	return strings.Join(parts, ".")
}

// Dialect is the lexical rules of one SQL dialect: where string literals,
// quoted identifiers and comments begin and end, and how bound parameters are
// written. Each dialect is lexed by its own rules rather than by a common
// approximation, because for SQLite, whose driver runs every statement in a
// string, the wrapper's one-statement check must see the text as SQLite
// will, or a count would run more than the query.
type Dialect struct {
	name string
	// placeholder renders the n-th (1-based) bound parameter.
	placeholder func(n int) string
	// nestedComments: Postgres block comments nest, SQLite's end at the
	// first */.
	nestedComments bool
	// postgresStrings: Postgres $tag$...$tag$ string constants and E'...'
	// strings with backslash escapes.
	postgresStrings bool
	// bracketIdents: SQLite also quotes identifiers as [name] and `name`.
	// Postgres has neither: [ is an array subscript there.
	bracketIdents bool
	// foldLower: Postgres folds an unquoted identifier to lower case.
	foldLower bool
	// caseInsensitive: SQLite compares identifiers ignoring ASCII case,
	// quoted or not.
	caseInsensitive bool
}

// SQLite is SQLite's dialect. Parameters are numbered ?NNN so that one value
// can be referenced more than once.
var SQLite = Dialect{
	name:            "sqlite",
	placeholder:     func(n int) string { return "?" + strconv.Itoa(n) },
	bracketIdents:   true,
	caseInsensitive: true,
}

// Postgres is PostgreSQL's dialect.
var Postgres = Dialect{
	name:            "postgres",
	placeholder:     func(n int) string { return "$" + strconv.Itoa(n) },
	nestedComments:  true,
	postgresStrings: true,
	foldLower:       true,
}

// DuckDB is DuckDB's dialect. Its parser is PostgreSQL's, so literals
// (dollar-quoted and E'...' strings), nested block comments and $n
// parameters lex as there; but it keeps names as written and matches them
// ignoring case, quoted or not.
var DuckDB = Dialect{
	name:            "duckdb",
	placeholder:     func(n int) string { return "$" + strconv.Itoa(n) },
	nestedComments:  true,
	postgresStrings: true,
	caseInsensitive: true,
}

// String names the dialect.
func (d Dialect) String() string { return d.name }

// Placeholder renders the n-th (1-based) bound parameter.
func (d Dialect) Placeholder(n int) string { return d.placeholder(n) }

// BindPartition replaces every :partition parameter in sql with placeholder
// and reports how many it replaced. Only whole-word occurrences in code are
// parameters: not ::partition (a Postgres cast to a type of that name), not
// :partitions, and nothing inside string literals, quoted identifiers or
// comments. It works on any SQL, several statements included, so a sql job
// binds the same way a query job does.
func (d Dialect) BindPartition(sql, placeholder string) (bound string, n int) {
	at := d.partitionParams(sql)
	if len(at) == 0 {
		return sql, 0
	}
	var b strings.Builder
	b.Grow(len(sql) + len(at)*(len(placeholder)-len(PartitionParam)))
	last := 0
	for _, i := range at {
		b.WriteString(sql[last:i])
		b.WriteString(placeholder)
		last = i + len(PartitionParam)
	}
	b.WriteString(sql[last:])
	return b.String(), len(at)
}

// partitionParams returns the byte offsets of the :partition parameters in
// sql.
func (d Dialect) partitionParams(sql string) []int {
	var at []int
	d.scan(sql, func(i int) int {
		if sql[i] != ':' || !strings.HasPrefix(sql[i:], PartitionParam) {
			return 0
		}
		if i > 0 && sql[i-1] == ':' {
			return 0
		}
		if end := i + len(PartitionParam); end < len(sql) && isIdentByte(sql[end]) {
			return 0
		}
		at = append(at, i)
		return len(PartitionParam)
	})
	return at
}

// Subquery checks that query can be wrapped as a subquery, FROM (query) q,
// and returns it with any trailing semicolons removed. It rejects what would
// let the wrapped text be anything but one SELECT: a semicolon followed by
// more code, an unterminated string, identifier or comment, and unbalanced
// parentheses (which could close the wrapper early). The errors wrap
// refill.ErrBadInput because the query comes from the config.
func (d Dialect) Subquery(query string) (string, error) {
	var (
		depth      int
		semicolons []int // trailing ';' not yet followed by more code
		code       bool  // any code seen at all
		bad        error
	)
	unterminated := d.scan(query, func(i int) int {
		c := query[i]
		switch {
		case bad != nil:
			return len(query) - i // stop at the first problem
		case isSpace(c):
			return 0
		case c == ';':
			semicolons = append(semicolons, i)
			return 0
		case len(semicolons) > 0:
			bad = refill.BadInputf("query has more than one statement (a %q at %s): a query job is one SELECT", ";", position(query, semicolons[0]))
			return 0
		}
		code = true
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				bad = refill.BadInputf("query has an unmatched %q at %s", ")", position(query, i))
			}
		}
		return 0
	})
	switch {
	case bad != nil:
		return "", bad
	case unterminated >= 0:
		return "", refill.BadInputf("query has an unterminated string, quoted name or comment starting at %s", position(query, unterminated))
	case depth > 0:
		return "", refill.BadInputf("query has %d unclosed %q", depth, "(")
	case !code:
		return "", refill.BadInputf("query is empty")
	}
	if len(semicolons) > 0 {
		// Only blanks and comments follow: blank out the semicolons and keep
		// the comments, which the wrapper ends with a newline.
		b := []byte(query)
		for _, i := range semicolons {
			b[i] = ' '
		}
		query = string(b)
	}
	return strings.TrimRightFunc(query, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }), nil
}

// CountEach returns one statement that counts, for each of n partitions, the
// rows query yields. Row i of the result is (i, count) for the partition
// bound to parameter i+1, so the caller passes the n partition keys as the
// arguments in order; the index is a literal rather than the key so that a
// parameter keeps the one type the query gives it. params is n when the
// query uses :partition and 0 when it does not, in which case no argument may
// be passed. The query is checked with Subquery first.
func (d Dialect) CountEach(query string, n int) (stmt string, params int, err error) {
	q, err := d.Subquery(query)
	if err != nil {
		return "", 0, err
	}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("\nUNION ALL\n")
		}
		bound, uses := d.BindPartition(q, d.Placeholder(i+1))
		if uses > 0 {
			params = n
		}
		// The newline before the closing parenthesis ends a trailing line
		// comment in the user's query.
		fmt.Fprintf(&b, "SELECT %d AS i, count(*) AS n FROM (\n%s\n) AS q", i, bound)
	}
	return b.String(), params, nil
}

// scan walks sql and calls code for every byte offset that is in code, that
// is, outside string literals, quoted identifiers and comments. code returns
// how many extra bytes to skip (0 to go on with the next byte). scan returns
// the offset at which an unterminated literal or comment starts, or -1.
func (d Dialect) scan(sql string, code func(i int) int) (unterminated int) {
	return d.lex(sql, code, nil)
}

// lex is scan that also reports each literal, quoted identifier or comment
// it steps over to skipped, if skipped is not nil: the byte range and
// whether it is a comment.
func (d Dialect) lex(sql string, code func(i int) int, skipped func(start, end int, comment bool)) (unterminated int) {
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		var end int // offset just after the literal or comment, -1 if none
		switch {
		case c == '\'':
			escapes := d.postgresStrings && i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i < 2 || !isIdentByte(sql[i-2]))
			end = quoted(sql, i, '\'', escapes)
		case c == '"':
			end = quoted(sql, i, '"', false)
		case c == '`' && d.bracketIdents:
			end = quoted(sql, i, '`', false)
		case c == '[' && d.bracketIdents:
			end = strings.IndexByte(sql[i+1:], ']')
			if end >= 0 {
				end += i + 2
			}
		case c == '-' && i+1 < n && sql[i+1] == '-':
			// SQLite ends a line comment at a newline; PostgreSQL's
			// scanner, and DuckDB's (which is PostgreSQL's), at a
			// carriage return too.
			stop := "\n"
			if d.postgresStrings {
				stop = "\n\r"
			}
			end = strings.IndexAny(sql[i:], stop)
			if end < 0 {
				end = n // a line comment may end the text
			} else {
				end += i + 1
			}
		case c == '/' && i+1 < n && sql[i+1] == '*':
			end = d.blockComment(sql, i)
		case c == '$' && d.postgresStrings && (i == 0 || !isIdentByte(sql[i-1])):
			tag, ok := dollarTag(sql[i:])
			if !ok {
				i += 1 + code(i)
				continue
			}
			end = strings.Index(sql[i+len(tag):], tag)
			if end >= 0 {
				end += i + 2*len(tag)
			}
		default:
			i += 1 + code(i)
			continue
		}
		if end < 0 {
			return i
		}
		if skipped != nil {
			skipped(i, end, c == '-' || c == '/')
		}
		i = end
	}
	return -1
}

// quoted returns the offset just after the literal opened by q at sql[i], or
// -1 if it is not closed. A doubled quote is an escaped quote; with
// backslashes, a backslash escapes the next byte.
func quoted(sql string, i int, q byte, backslashes bool) int {
	for j := i + 1; j < len(sql); j++ {
		switch sql[j] {
		case '\\':
			if backslashes {
				j++
			}
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}

// blockComment returns the offset just after the comment opened at sql[i], or
// -1 if it is not closed.
func (d Dialect) blockComment(sql string, i int) int {
	depth := 0
	for j := i; j+1 < len(sql); j++ {
		switch {
		case sql[j] == '/' && sql[j+1] == '*' && (depth == 0 || d.nestedComments):
			depth++
			j++
		case sql[j] == '*' && sql[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// dollarTag returns the opening tag of a Postgres dollar-quoted string at the
// start of s ($$ or $name$). $1 is a parameter, not a tag.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case c >= '0' && c <= '9':
			if j == 1 {
				return "", false
			}
		case !isIdentByte(c):
			return "", false
		}
	}
	return "", false
}

// isIdentByte reports whether c can continue an unquoted identifier. Bytes
// of multi-byte UTF-8 characters count, as both dialects allow them.
func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 ||
		(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// position renders a byte offset as line:column (1-based) for error messages
// about a multi-line query in a YAML file.
func position(s string, off int) string {
	line := 1 + strings.Count(s[:off], "\n")
	col := off - strings.LastIndexByte(s[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// QueryError is a user's job query that the warehouse refused. It wraps
// refill.ErrBadInput, because a bad job query is a configuration problem the
// user fixes, and the driver's error, whose message says what is wrong.
type QueryError struct {
	// Partition is the first partition the failed statement was counting.
	Partition string
	Err       error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("the job query failed in the warehouse for partition %s: %v", e.Partition, e.Err)
}

// Unwrap lets errors.Is find refill.ErrBadInput and errors.As the driver's
// error.
func (e *QueryError) Unwrap() []error { return []error{refill.ErrBadInput, e.Err} }

// Of returns the dialect of the engine a warehouse driver names (its Driver
// method, as the warehouse opener maps a DSN's scheme): how it folds,
// quotes and matches the table and column names of the config, so that code
// above the drivers, such as the planner checking a partition column, finds
// a column exactly as the driver will. A driver it does not know gets
// PostgreSQL's rules, under which a name matches only as SQL would fold it.
func Of(driver string) Dialect {
	switch driver {
	case "sqlite":
		return SQLite
	case "duckdb":
		return DuckDB
	}
	return Postgres
}
