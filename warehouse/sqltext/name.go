package sqltext

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/refill-dev/refill"
)

// Table and column names in refill.yaml are written as SQL writes them, so
// that a name means in the config what it means in the user's own SQL:
//
//	table: analytics.events        # plain: PostgreSQL folds it to lower case
//	table: analytics.Events        # the same table as analytics.events
//	table: 'analytics."Events"'    # quoted: the table created as "Events"
//	partition: {column: '"EventDate"'}
//
// A plain part is letters, digits and _, not starting with a digit; a
// quoted part is any printable text but a double quote or a dot, in double
// quotes (the YAML single quotes only keep YAML from reading the double
// quotes itself). A table has at most two parts, schema and table; a column
// has one.
//
// How a name is folded and compared is each dialect's: PostgreSQL folds a
// plain part to lower case, exactly as it folds an unquoted identifier, and
// matches the result exactly; SQLite keeps case but compares names ignoring
// ASCII case, quoted or not. Resolve, QuoteName, Column and MatchColumn are
// the only places that know it, so a driver that names a table or finds a
// column cannot disagree with another, or with the planner.

// MaxNameBytes is the longest part of a name refill accepts: PostgreSQL's
// limit (NAMEDATALEN - 1). It silently cuts longer names, which could make
// two configured tables one.
const MaxNameBytes = 63

// NamePart is one dot-separated part of a name from the config.
type NamePart struct {
	// Text is the part as written, without its quotes.
	Text string
	// Quoted is set when the part was in double quotes, which keep its
	// case on every engine.
	Quoted bool
}

// ParseName checks a table or column name as refill.yaml writes it and
// returns its parts. Its errors wrap refill.ErrBadInput and say what is
// wrong with the name without repeating it, so that the config loader can
// put them after the file, line, key and name.
func ParseName(name string) ([]NamePart, error) {
	if name == "" {
		return nil, refill.BadInputf("is empty")
	}
	raw := strings.Split(name, ".")
	parts := make([]NamePart, len(raw))
	for i, s := range raw {
		p, err := parsePart(s)
		if err == nil {
			parts[i] = p
			continue
		}
		switch {
		case len(raw) == 1:
			return nil, refill.BadInputf("%s", err)
		case s == "":
			return nil, refill.BadInputf("has an empty part: a dot must stand between two names, as in analytics.events")
		case strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }):
			return nil, refill.BadInputf("has a part %q that %s", s, err)
		}
		return nil, refill.BadInputf("has a part %s that %s", s, err)
	}
	return parts, nil
}

// parsePart reads one part of a name, between dots. Its errors complete
// "the name ..." or "a part ... that ...".
func parsePart(s string) (NamePart, error) {
	switch {
	case s == "":
		return NamePart{}, errors.New(`is empty`)
	case s[0] == '"':
		inner, closed := strings.CutSuffix(s[1:], `"`)
		switch {
		case !closed:
			return NamePart{}, errors.New(`has an unbalanced double quote: a quoted name is closed by a second ", and cannot hold a dot`)
		case inner == "":
			return NamePart{}, errors.New(`is an empty quoted name ""`)
		case strings.Contains(inner, `"`):
			return NamePart{}, errors.New(`has a double quote inside a quoted name: quote each part of schema.table on its own, as in analytics."Events"; no name may hold a double quote`)
		case !utf8.ValidString(inner):
			return NamePart{}, errors.New("is not valid UTF-8")
		case strings.ContainsFunc(inner, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }):
			return NamePart{}, errors.New("has a control character")
		case len(inner) > MaxNameBytes:
			return NamePart{}, fmt.Errorf("is %d bytes long, more than PostgreSQL's %d", len(inner), MaxNameBytes)
		}
		return NamePart{Text: inner, Quoted: true}, nil
	case strings.Contains(s, `"`):
		return NamePart{}, errors.New(`has a double quote inside it: quotes go around a whole name, as in analytics."Events"`)
	case !plain(s):
		return NamePart{}, errors.New(`is not a plain name (ASCII letters, digits and _, not starting with a digit); put a name with other characters in double quotes, as in '"Order Items"'`)
	case len(s) > MaxNameBytes:
		return NamePart{}, fmt.Errorf("is %d bytes long, more than PostgreSQL's %d", len(s), MaxNameBytes)
	}
	return NamePart{Text: s}, nil
}

// plain reports whether s is an identifier every SQL dialect reads
// unquoted: ASCII letters, digits and _, not starting with a digit.
func plain(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Resolve returns the parts of name as the engine stores them: a quoted
// part without its quotes; a plain part folded to lower case on
// PostgreSQL, as it folds an unquoted identifier, and kept on SQLite,
// which compares names ignoring case anyway. Resolve accepts any text: a
// part that is neither plain nor quoted whole, such as a snapshot table
// refill names after a quoted table (refill_snap_…_"Events"_…), is taken
// exactly as written, so that every statement naming it names one table.
func (d Dialect) Resolve(name string) []string {
	raw := strings.Split(name, ".")
	out := make([]string, len(raw))
	for i, s := range raw {
		p, err := parsePart(s)
		switch {
		case err != nil:
			out[i] = s
		case !p.Quoted && d.foldLower:
			out[i] = strings.ToLower(p.Text)
		default:
			out[i] = p.Text
		}
	}
	return out
}

// QuoteName renders a table or column name from the config as SQL in d:
// each part of Resolve in double quotes, so that the name means on the
// engine what it means written in refill.yaml, whatever the part holds.
// It is the one function through which the drivers name a configured
// table in SQL; a column is found with Column first and named as the
// engine reported it.
func (d Dialect) QuoteName(name string) string {
	parts := d.Resolve(name)
	for i, p := range parts {
		parts[i] = quotePart(p)
	}
	return strings.Join(parts, ".")
}

// quotePart quotes one identifier exactly as the engine stores it.
// Embedded double quotes are doubled, so no name can end the quoting early.
func quotePart(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Column finds the column of cols that a column name from the config
// means: the name resolved as the dialect resolves it, then matched as
// MatchColumn matches.
func (d Dialect) Column(cols []refill.Column, name string) (refill.Column, bool) {
	parts := d.Resolve(name)
	if len(parts) != 1 {
		return refill.Column{}, false
	}
	return d.MatchColumn(cols, parts[0])
}

// MatchColumn finds the column of cols called name, a name as the engine
// reports it (a query's output column, another table's column): exactly
// on PostgreSQL, and ignoring ASCII case on SQLite, as each engine itself
// resolves a name.
func (d Dialect) MatchColumn(cols []refill.Column, name string) (refill.Column, bool) {
	for _, c := range cols {
		if d.SameName(c.Name, name) {
			return c, true
		}
	}
	return refill.Column{}, false
}

// SameName reports whether two names, as the engine stores them, name one
// thing: on SQLite whatever their ASCII case (SQLite folds only ASCII
// letters), on PostgreSQL only when equal.
func (d Dialect) SameName(a, b string) bool {
	if !d.caseInsensitive {
		return a == b
	}
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ColumnNames lists cols' names, for messages that say which columns a
// table has.
func ColumnNames(cols []refill.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// Spelling is how refill.yaml writes the name whose parts are stored as
// parts: a part plain when the dialect resolves the plain form to it, and
// in double quotes otherwise.
func (d Dialect) Spelling(parts ...string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		if plain(p) && (!d.foldLower || p == strings.ToLower(p)) {
			out[i] = p
		} else {
			out[i] = `"` + p + `"`
		}
	}
	return strings.Join(out, ".")
}

// CaseHint explains a name from the config that resolved to nothing when
// the engine has others that differ from it only in case, given as their
// stored parts: what the name was read as, and how to write the others. It
// is "" when there are none. The usual cause is a table or column created
// with capitals in quotes and written without them in refill.yaml, or the
// reverse.
func (d Dialect) CaseHint(written string, others [][]string) string {
	if len(others) == 0 {
		return ""
	}
	var b strings.Builder
	if parts, err := ParseName(written); err == nil && d.foldLower {
		for _, p := range parts {
			if !p.Quoted && strings.ToLower(p.Text) != p.Text {
				fmt.Fprintf(&b, "%s is read as %s, as unquoted SQL would be; ", written, strings.Join(d.Resolve(written), "."))
				break
			}
		}
	}
	b.WriteString("a name that differs only in case is written ")
	for i, o := range others {
		if i > 0 {
			b.WriteString(" or ")
		}
		s := d.Spelling(o...)
		if strings.Contains(s, `"`) {
			s = "'" + s + "'" // as YAML needs it
		}
		b.WriteString(s)
	}
	return b.String()
}

// NoColumn is the error for a column name from the config that names no
// column of table: it names the column as written, says what named it
// (what, such as "the partition column"), lists the table's columns, and
// adds CaseHint's explanation when one differs only in case.
func (d Dialect) NoColumn(table, name, what string, cols []refill.Column) error {
	msg := fmt.Sprintf("table %s has no column %s (%s); its columns are %s", table, name, what, ColumnNames(cols))
	if hint := d.ColumnHint(cols, name); hint != "" {
		msg += "; " + hint
	}
	return refill.BadInputf("%s", msg)
}

// ColumnHint is CaseHint for a column name that Column did not find in
// cols.
func (d Dialect) ColumnHint(cols []refill.Column, name string) string {
	resolved := strings.Join(d.Resolve(name), ".")
	var others [][]string
	for _, c := range cols {
		if strings.EqualFold(c.Name, resolved) && !d.SameName(c.Name, resolved) {
			others = append(others, []string{c.Name})
		}
	}
	return d.CaseHint(name, others)
}

// NoTableError is refill.ErrNoTable for one table name from the config,
// with CaseHint's explanation when the engine has a table whose name
// differs from it only in case.
type NoTableError struct {
	// Table is the name as the config writes it.
	Table string
	// Hint is CaseHint's explanation, or "".
	Hint string
}

func (e *NoTableError) Error() string {
	if e.Hint == "" {
		return fmt.Sprintf("%v: %s", refill.ErrNoTable, e.Table)
	}
	return fmt.Sprintf("%v: %s (%s)", refill.ErrNoTable, e.Table, e.Hint)
}

// Unwrap lets errors.Is find refill.ErrNoTable.
func (e *NoTableError) Unwrap() error { return refill.ErrNoTable }
