package sqltext

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func TestParseName(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []NamePart
	}{
		{"events", []NamePart{{Text: "events"}}},
		{"Events", []NamePart{{Text: "Events"}}},
		{"analytics.events_2", []NamePart{{Text: "analytics"}, {Text: "events_2"}}},
		{`"Events"`, []NamePart{{Text: "Events", Quoted: true}}},
		{`analytics."Events"`, []NamePart{{Text: "analytics"}, {Text: "Events", Quoted: true}}},
		{`"Analytics".events`, []NamePart{{Text: "Analytics", Quoted: true}, {Text: "events"}}},
		{`"Order Items"`, []NamePart{{Text: "Order Items", Quoted: true}}},
		{`"événements"`, []NamePart{{Text: "événements", Quoted: true}}},
		{`"1st"`, []NamePart{{Text: "1st", Quoted: true}}},
	} {
		got, err := ParseName(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseName(%s) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for in, msg := range map[string]string{
		"":                                  "is empty",
		"analytics.":                        "has an empty part",
		".events":                           "has an empty part",
		"a..b":                              "has an empty part",
		`"Events`:                           "unbalanced double quote",
		`Events"`:                           "double quote inside it",
		`analytics."Events`:                 `has a part "Events that has an unbalanced double quote`,
		`"analytics.Events"`:                `has a part "analytics that has an unbalanced double quote`,
		`""`:                                "empty quoted name",
		`"a""b"`:                            "double quote inside a quoted name",
		`"a"b"`:                             "double quote inside a quoted name",
		`a"b"`:                              "double quote inside it",
		"events; DROP TABLE x":              "is not a plain name",
		"1st":                               "is not a plain name",
		"événements":                        "is not a plain name",
		"\"a\nb\"":                          "control character",
		"x.\"a\tb\"":                        `has a part "\"a\tb\"" that has a control character`,
		"\"\xff\"":                          "not valid UTF-8",
		strings.Repeat("e", 64):             "64 bytes long",
		`"` + strings.Repeat("E", 64) + `"`: "64 bytes long",
	} {
		_, err := ParseName(in)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseName(%q): error = %v, want bad input saying %q", in, err, msg)
		}
	}
}

func TestQuoteName(t *testing.T) {
	for _, tt := range []struct {
		in, postgres, sqlite string
	}{
		{"events", `"events"`, `"events"`},
		{"Events", `"events"`, `"Events"`},
		{"EVENTS", `"events"`, `"EVENTS"`},
		{`"Events"`, `"Events"`, `"Events"`},
		{`"events"`, `"events"`, `"events"`},
		{"Analytics.Events", `"analytics"."events"`, `"Analytics"."Events"`},
		{`analytics."Events"`, `"analytics"."Events"`, `"analytics"."Events"`},
		{`"Analytics".Events`, `"Analytics"."events"`, `"Analytics"."Events"`},
		{`"Order Items"`, `"Order Items"`, `"Order Items"`},
		// Not config syntax, as refill names snapshots after a quoted
		// table: taken as written, and still one quoted identifier.
		{`analytics.refill_snap_p1_"Events"_ab12`, `"analytics"."refill_snap_p1_""Events""_ab12"`, `"analytics"."refill_snap_p1_""Events""_ab12"`},
		{"refill_snap_p1_Events_ab12", `"refill_snap_p1_events_ab12"`, `"refill_snap_p1_Events_ab12"`},
	} {
		if got := Postgres.QuoteName(tt.in); got != tt.postgres {
			t.Errorf("Postgres.QuoteName(%s) = %s, want %s", tt.in, got, tt.postgres)
		}
		if got := SQLite.QuoteName(tt.in); got != tt.sqlite {
			t.Errorf("SQLite.QuoteName(%s) = %s, want %s", tt.in, got, tt.sqlite)
		}
	}
}

// TestColumn is the one rule each engine matches a configured column name
// by: PostgreSQL exactly after folding, SQLite ignoring ASCII case.
func TestColumn(t *testing.T) {
	cols := []refill.Column{{Name: "id"}, {Name: "event_date"}, {Name: "EventTime"}, {Name: "Straße"}}
	for _, tt := range []struct {
		name             string
		postgres, sqlite string // the column found, "" for none
	}{
		{"event_date", "event_date", "event_date"},
		{"EVENT_DATE", "event_date", "event_date"},
		{`"event_date"`, "event_date", "event_date"},
		{`"Event_Date"`, "", "event_date"},
		{"EventTime", "", "EventTime"},
		{"eventtime", "", "EventTime"},
		{`"EventTime"`, "EventTime", "EventTime"},
		{`"Straße"`, "Straße", "Straße"},
		{`"STRASSE"`, "", ""},
		{`"STRAßE"`, "", "Straße"}, // SQLite folds ASCII letters only
		{"nope", "", ""},
		{"a.id", "", ""},
	} {
		for _, d := range []struct {
			Dialect
			want string
		}{{Postgres, tt.postgres}, {SQLite, tt.sqlite}} {
			c, ok := d.Column(cols, tt.name)
			if ok != (d.want != "") || c.Name != d.want {
				t.Errorf("%s.Column(%s) = %q, %v; want %q", d.Dialect, tt.name, c.Name, ok, d.want)
			}
		}
	}
	// A query's output names come already folded, and match as stored.
	if _, ok := Postgres.MatchColumn(cols, "eventtime"); ok {
		t.Error(`Postgres.MatchColumn(eventtime) found "EventTime"`)
	}
	if c, ok := SQLite.MatchColumn(cols, "EVENTTIME"); !ok || c.Name != "EventTime" {
		t.Errorf("SQLite.MatchColumn(EVENTTIME) = %q, %v", c.Name, ok)
	}
}

func TestNoColumnHint(t *testing.T) {
	cols := []refill.Column{{Name: "id"}, {Name: "EventDate"}, {Name: "day"}}
	err := Postgres.NoColumn("events", "EventDate", "the partition column", cols)
	for _, want := range []string{
		"table events has no column EventDate (the partition column); its columns are id, EventDate, day",
		"EventDate is read as eventdate",
		`is written '"EventDate"'`,
	} {
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("NoColumn: %v; want bad input saying %q", err, want)
		}
	}
	// Quoted when it should not be: the hint shows the plain spelling.
	err = Postgres.NoColumn("events", `"Day"`, "the partition column", cols)
	if !strings.Contains(err.Error(), "a name that differs only in case is written day") || strings.Contains(err.Error(), "is read as") {
		t.Errorf("NoColumn(\"Day\"): %v", err)
	}
	if hint := Postgres.ColumnHint(cols, "nope"); hint != "" {
		t.Errorf("ColumnHint(nope) = %q, want none", hint)
	}
}

func TestNoTableError(t *testing.T) {
	e := &NoTableError{Table: "Events", Hint: Postgres.CaseHint("Events", [][]string{{"Events"}})}
	if !errors.Is(e, refill.ErrNoTable) {
		t.Error("NoTableError does not wrap ErrNoTable")
	}
	want := `table does not exist: Events (Events is read as events, as unquoted SQL would be; a name that differs only in case is written '"Events"')`
	if e.Error() != want {
		t.Errorf("Error() = %s\nwant      %s", e.Error(), want)
	}
	if got := Postgres.CaseHint(`analytics."events"`, [][]string{{"analytics", "Events"}}); got != `a name that differs only in case is written 'analytics."Events"'` {
		t.Errorf("CaseHint = %s", got)
	}
}

// FuzzName checks that no text makes ParseName or Resolve panic, and that
// every name ParseName accepts quotes, in both dialects, into exactly as
// many SQL identifiers as it has parts, each holding the part's text
// (folded on PostgreSQL when plain).
func FuzzName(f *testing.F) {
	for _, s := range []string{"events", "Analytics.Events", `analytics."Events"`, `"a""b"`, `"a.b"`, ".", `""`, `"`, "a.b.c", "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		parts, err := ParseName(name)
		for _, d := range []Dialect{Postgres, SQLite} {
			resolved := d.Resolve(name)
			q := d.QuoteName(name)
			if err != nil {
				continue
			}
			if len(resolved) != len(parts) {
				t.Fatalf("%s.Resolve(%q) = %q, ParseName = %v", d, name, resolved, parts)
			}
			for i, p := range parts {
				want := p.Text
				if !p.Quoted && d.foldLower {
					want = strings.ToLower(want)
				}
				if resolved[i] != want || strings.ContainsAny(want, `".`) || want == "" {
					t.Fatalf("%s.Resolve(%q)[%d] = %q, want %q", d, name, i, resolved[i], want)
				}
			}
			if strings.Count(q, `"`) != 2*len(parts) {
				t.Fatalf("%s.QuoteName(%q) = %s", d, name, q)
			}
		}
	})
}
