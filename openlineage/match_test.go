package openlineage_test

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// TestMatch pins the matching rule (openlineage.Matcher): an explicit
// openlineage name matches exactly and alone; a qualified table matches
// the event name's last two parts, an unqualified one its last part,
// without regard to case unless quoted; the namespace counts only for an
// explicit name.
func TestMatch(t *testing.T) {
	m := openlineage.NewMatcher(map[string]*refill.Dataset{
		"events_daily":  {Name: "events_daily", Table: "public.events_daily"},
		"sessions":      {Name: "sessions", Table: "sessions"},
		"camel":         {Name: "camel", Table: `analytics."Events"`},
		"revenue_daily": {Name: "revenue_daily", Table: "revenue_daily", OpenLineage: &refill.OpenLineageName{Namespace: "postgres://db:5432", Name: "db.finance.revenue"}},
		"partner_feed":  {Name: "partner_feed", Job: &refill.Job{Kind: refill.JobCommand}},
	})
	for _, c := range []struct {
		namespace, name, want string
	}{
		{"postgres://db:5432", "analytics.public.events_daily", "events_daily"},
		{"bigquery", "public.events_daily", "events_daily"},
		{"x", "ANALYTICS.PUBLIC.EVENTS_DAILY", "events_daily"},
		{"x", "events_daily", ""},                    // a qualified table needs two parts
		{"x", "analytics.other.events_daily", ""},    // another schema
		{"x", "public.events_daily_v2", ""},          // another table
		{"x", "warehouse.main.sessions", "sessions"}, // unqualified: the last part
		{"x", "sessions", "sessions"},
		{"x", "db.Sessions", "sessions"},
		{"x", "main.sessions.bak", ""},
		{"x", "db.analytics.Events", "camel"},
		{"x", "db.analytics.events", ""},      // quoted: exact case
		{"x", "db.ANALYTICS.Events", "camel"}, // the unquoted part folds
		{"postgres://db:5432", "db.finance.revenue", "revenue_daily"},
		{"postgres://other:5432", "db.finance.revenue", ""},   // explicit: the namespace counts
		{"postgres://db:5432", "db.public.revenue_daily", ""}, // explicit: the table is not compared
		{"x", "partner_feed", ""},                             // no table, no name: nothing matches
	} {
		got := strings.Join(m.Match(refill.OpenLineageName{Namespace: c.namespace, Name: c.name}), ",")
		if got != c.want {
			t.Errorf("%s %s matched %q, want %q", c.namespace, c.name, got, c.want)
		}
	}
	// Two datasets may match one event dataset (a qualified and an
	// unqualified table of one name); both are named, sorted.
	m = openlineage.NewMatcher(map[string]*refill.Dataset{
		"b": {Name: "b", Table: "events"},
		"a": {Name: "a", Table: "public.events"},
	})
	if got := m.Match(refill.OpenLineageName{Namespace: "x", Name: "db.public.events"}); strings.Join(got, ",") != "a,b" {
		t.Errorf("matched %v, want a,b", got)
	}
}
