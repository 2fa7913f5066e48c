package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// FuzzParse feeds Parse arbitrary bytes. Parse reads a file a person wrote,
// so whatever is in it, Parse must not panic, every error must be bad input
// in the one-line file:line: shape, and anything it accepts must hold the
// guarantees the planner relies on.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/refill.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	for _, seed := range []string{
		"",
		head,
		head + "datasets:\n  a: {table: a, partition: {column: d}, upstream: [b], job: {query: ':partition'}}\n  b: {table: b, partition: {column: d}, upstream: [a], job: {query: ':partition'}}\n",
		head + "datasets:\n  'x; DROP TABLE y': {table: 'events; DROP TABLE x'}\n",
		head + "datasets:\n  a: &a {table: a, partition: {column: d}}\n  b:\n    <<: *a\n    table: b\n",
		head + "datasets:\n  e:\n    job: {command: [./x], env: {A: 1}, timeout: 5m}\n    checks: {volume: {lookback: 1.5, max_z: .nan}}\n",
		head + "policy: {auto_max_days: 40, rules: [{name: r, when: 'true', tier: manual}]}\nusers: {bob: {roles: [admin]}}\n",
		head + "datasets:\n  e: {table: 'analytics.\"Events\"', partition: {column: '\"EventDate\"'}, checks: {not_null: {columns: ['\"User Id\"', amount]}}}\n",
		head + "datasets:\n  e: {table: Analytics.EVENTS, partition: {column: Day}, checks: {no_future: ['\"At\"'], time_order: [{earlier: '\"A\"', later: b}]}}\n",
		head + "datasets:\n  e: {table: 'analytics.\"Ev', partition: {column: d}}\n",
		head + "datasets:\n  e: {table: '\"Ev.ents\"', partition: {column: '\"\"'}}\n",
		head + "datasets:\n  e: {table: 'a.\"b\"\"c\"', partition: {column: 'x\"y'}}\n",
		head + "datasets:\n  e: {table: '.events', partition: {column: '\"d\"\"'}}\n",
		head + "datasets:\n  a: {table: '\"Events\"', partition: {column: d}}\n  b: {table: events, partition: {column: d}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d}, checks: {unique: [id, '\"K\"'], accepted_values: {currency: [KRW, USD], code: [1, -2]}, drift: {columns: [amount, kind], lookback: 14, max_z: 4}}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d}, checks: {unique: [], accepted_values: {columns: {c: [a]}, max_ratio: 0.001}, drift: {columns: [], lookback: 0, max_z: -1}}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d}, checks: {accepted_values: {columns: [a], max_ratio: .nan, x: 1}, drift: {columns: [a.b]}}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d}, checks: {accepted_values: {max_ratio: 1, c: {d: 1}}, unique: x}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d}, checks: {accepted_values: [a], drift: {columns: [a], extra: 1}}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d, grain: hour, timezone: America/New_York}, checks: {volume: {min_change: 0.2, calendar: [12-25, 2026-11-26, 02-29]}}}\n",
		head + "datasets:\n  e: {table: e, partition: {column: d, timezone: ../../x}, checks: {volume: {min_change: .nan, calendar: [13-01, 1, null]}}}\n",
		"version: 1\nwarehouse: [\n",
		"version: 1\n\twarehouse: x\n",
		"a: 1\n---\nb: 2\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "refill.yaml")
		if err != nil {
			if cfg != nil {
				t.Errorf("Parse returned a config and an error")
			}
			if !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("error is not bad input: %v", err)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is %T, want a non-empty Errors", err)
			}
			for _, e := range es {
				if e.Line < 1 || e.Msg == "" || strings.Contains(e.Error(), "\n") || !strings.HasPrefix(e.Error(), "refill.yaml:") {
					t.Fatalf("malformed error %#v: %q", e, e.Error())
				}
			}
			return
		}
		checkAccepted(t, cfg)
	})
}

// checkAccepted asserts what the rest of refill may assume of any config
// Parse accepts.
func checkAccepted(t *testing.T, cfg *refill.Config) {
	t.Helper()
	if cfg.Warehouse == "" || cfg.State == "" || cfg.MaxRangeDays < 1 {
		t.Fatalf("accepted config without warehouse, state or range limit: %+v", cfg)
	}
	if cfg.Run.MaxActive < 1 || cfg.Run.MaxActive > cfg.Run.MaxActiveTotal || cfg.Run.Attempts < 1 {
		t.Fatalf("accepted run limits %+v", cfg.Run)
	}
	p := cfg.Policy
	if p.AutoMaxDays < 0 || p.AutoMaxDays > p.ManualOverDays {
		t.Fatalf("accepted policy %+v", p)
	}
	for name, d := range cfg.Datasets {
		if !identifier.MatchString(name) || d.Name != name {
			t.Fatalf("accepted dataset name %q", name)
		}
		if d.Table != "" {
			checkName(t, "table", d.Table, 2)
			checkName(t, "partition column", d.Partition.Column, 1)
		}
		if d.Partition.Grain != refill.GrainDay && d.Partition.Grain != refill.GrainHour {
			t.Fatalf("accepted grain %q", d.Partition.Grain)
		}
		for _, up := range d.Upstream {
			if up == name || cfg.Datasets[up] == nil {
				t.Fatalf("accepted upstream %q of %s", up, name)
			}
		}
		if j := d.Job; j != nil && (j.Kind == refill.JobQuery || j.Kind == refill.JobSQL) && d.Table == "" {
			t.Fatalf("accepted %s job without a table", j.Kind)
		}
		if _, err := refill.LoadZone(d.Partition.Timezone); err != nil {
			t.Fatalf("accepted timezone %q", d.Partition.Timezone)
		}
		if c := d.Checks; c != nil {
			if c.NotNull != nil {
				for _, col := range c.NotNull.Columns {
					checkName(t, "not_null column", col, 1)
				}
			}
			for _, to := range c.TimeOrder {
				checkName(t, "time_order column", to.Earlier, 1)
				checkName(t, "time_order column", to.Later, 1)
			}
			for _, col := range c.NoFuture {
				checkName(t, "no_future column", col, 1)
			}
			if c.Volume != nil && (c.Volume.Lookback < 1 || !(c.Volume.MaxZ > 0) || c.Volume.MinChange < 0) {
				t.Fatalf("accepted volume check %+v", *c.Volume)
			}
			if c.Volume != nil {
				for _, day := range c.Volume.Calendar {
					if err := refill.ParseCalendarDay(day); err != nil {
						t.Fatalf("accepted calendar day %q: %v", day, err)
					}
				}
			}
			if !(c.MaxRatio >= 0 && c.MaxRatio <= 1) {
				t.Fatalf("accepted max_ratio %g", c.MaxRatio)
			}
		}
	}
	if cyc := lineage.Cycles(cfg.Datasets); len(cyc) > 0 {
		t.Fatalf("accepted lineage cycles %v", cyc)
	}
}

// checkName asserts that an accepted table or column name has at most
// maxParts parts, and that every dialect resolves each part to a name that
// quotes into SQL as exactly one identifier: not empty, within PostgreSQL's
// length, and holding no quote or dot that could end or split it.
func checkName(t *testing.T, what, name string, maxParts int) {
	t.Helper()
	parts, err := sqltext.ParseName(name)
	if err != nil || len(parts) > maxParts {
		t.Fatalf("accepted %s %q: %v", what, name, err)
	}
	for _, d := range []sqltext.Dialect{sqltext.SQLite, sqltext.Postgres} {
		resolved := d.Resolve(name)
		if len(resolved) != len(parts) {
			t.Fatalf("%s %q: %s resolves %d parts, ParseName found %d", what, name, d, len(resolved), len(parts))
		}
		for _, p := range resolved {
			if p == "" || len(p) > maxIdentifier || strings.ContainsAny(p, `".`) {
				t.Fatalf("accepted %s %q resolves on %s to the part %q", what, name, d, p)
			}
		}
		if q := d.QuoteName(name); strings.Count(q, `"`) != 2*len(parts) {
			t.Fatalf("accepted %s %q quotes on %s as %s", what, name, d, q)
		}
	}
}
