package postgres_test

import (
	"os"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
)

// TestREADMEExamples runs the README's PostgreSQL example, the refill.yaml
// kept in testdata/readme_examples.yaml (the README's "PostgreSQL
// warehouses" section shows the same file), so that what it teaches stays
// true: the file loads, and its day- and hour-grain query jobs rebuild
// their partitions through ReplaceFromQuery, as a run does, and are
// counted by QueryCounts, as a plan does.
//
// The connection's time zone is America/New_York and the day is
// 2026-11-01, when New York's clocks go back: its local day has 25 hours,
// and its hour 2026-11-01T05 UTC is 01:00 the second time. A job that ran
// in the connection's time zone would count 50 half-hourly views for the
// day instead of 48, its view_date would put rows outside the partition,
// and its hour would be another hour.
func TestREADMEExamples(t *testing.T) {
	data, err := os.ReadFile("testdata/readme_examples.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "readme_examples.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w, err := postgres.Open(t.Context(), pgtest.Schema(t)+"&timezone=America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	for _, stmt := range []string{
		"CREATE TABLE page_views (viewed_at timestamptz, user_id bigint)",
		// A view every half hour from 2026-10-31 22:00 to 2026-11-02 02:00
		// UTC, by one of three users: 48 in the UTC day 2026-11-01.
		`INSERT INTO page_views
		 SELECT g, (extract(epoch FROM g)::bigint / 1800) % 3
		 FROM generate_series(timestamptz '2026-10-31 22:00Z', '2026-11-02 02:00Z', interval '30 minutes') g`,
		"CREATE TABLE daily_views (view_date date, views bigint, users bigint)",
		"CREATE TABLE hourly_views (view_hour timestamptz, views bigint)",
	} {
		if _, err := w.Pool().Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}

	for _, tt := range []struct {
		dataset, partition string
		views              int64
		check              string // a query whose one row must be true afterwards
	}{
		{"daily_views", "2026-11-01", 48, "SELECT view_date = '2026-11-01' AND views = 48 AND users = 3 FROM daily_views"},
		{"hourly_views", "2026-11-01T05", 2, "SELECT view_hour = '2026-11-01 05:00Z' AND views = 2 FROM hourly_views"},
	} {
		t.Run(tt.dataset, func(t *testing.T) {
			d := cfg.Datasets[tt.dataset]
			if d == nil || d.Job == nil || d.Job.Kind != refill.JobQuery {
				t.Fatalf("the example has no query job %s", tt.dataset)
			}
			ref := refill.TableRef{Table: d.Table, Column: d.Partition.Column, Grain: d.Partition.Grain}
			err := w.Transact(ctx, func(tx refill.WarehouseTx) error {
				n, err := tx.ReplaceFromQuery(ctx, ref, d.Job.Query, tt.partition)
				if err == nil && n != 1 {
					t.Errorf("ReplaceFromQuery wrote %d rows, want 1", n)
				}
				return err
			})
			if err != nil {
				t.Fatalf("the README's %s query: %v", tt.dataset, err)
			}
			var ok bool
			if err := w.Pool().QueryRow(ctx, tt.check).Scan(&ok); err != nil || !ok {
				t.Errorf("%s after the job: %q is %v (%v)", tt.dataset, tt.check, ok, err)
			}
			counts, err := w.PartitionCounts(ctx, ref, tt.partition, tt.partition)
			if err != nil || counts[tt.partition] != 1 {
				t.Errorf("PartitionCounts(%s) = %v, %v; want the one row in its partition", tt.partition, counts, err)
			}
			planned, err := w.QueryCounts(ctx, d.Job.Query, []string{tt.partition})
			if err != nil || planned[tt.partition] != 1 {
				t.Errorf("QueryCounts(%s) = %v, %v; want the 1 row the job wrote", tt.partition, planned, err)
			}
		})
	}

	// The hour literal itself is what PostgreSQL refuses as a timestamp,
	// which is why the example parses it with to_timestamp.
	var ts time.Time
	if err := w.Pool().QueryRow(ctx, "SELECT $1::text::timestamptz", "2026-11-01T05").Scan(&ts); err == nil {
		t.Errorf("PostgreSQL now reads 2026-11-01T05 as %v: the README's advice on hour literals is out of date", ts)
	}
}
