package run

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
)

// bundle is a runner over a real SQLite warehouse and a state store of one
// kind, with the planner that makes its plans.
type bundle struct {
	r  *Runner
	c  *control.Control // the door plans are applied through
	p  *planner.Planner
	st *store.Store
	w  *whtest.Warehouse
	// state is the state store's DSN.
	state string
}

var stores = map[string]func(t *testing.T) string{
	"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "state.db") },
	"postgres": func(t *testing.T) string { return pgtest.Schema(t) },
}

// eachStore runs fn with a fresh warehouse (src -> mid -> top) and a state
// store of every kind, so River runs on its SQLite and its pgx driver.
func eachStore(t *testing.T, fn func(t *testing.T, b *bundle)) {
	for name, dsn := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := whtest.Open(t, "sqlite")
			w.Exec(t,
				"CREATE TABLE src (day TEXT, v INTEGER)",
				"INSERT INTO src VALUES ('2026-11-01', 1), ('2026-11-01', 2), ('2026-11-02', 3), ('2026-11-03', 4), ('2026-11-03', 5), ('2026-11-03', 6)",
				"CREATE TABLE mid (day TEXT, v INTEGER)",
				"CREATE TABLE top (day TEXT, total INTEGER)",
				"INSERT INTO top VALUES ('2026-11-01', 99)",
			)
			state := dsn(t)
			st, err := store.Open(context.Background(), state, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			cfg := &refill.Config{Policy: refill.DefaultPolicy(), Run: refill.RunConfig{MaxActive: 2, MaxActiveTotal: 4, Attempts: 2, Tolerance: 0.1},
				Datasets: map[string]*refill.Dataset{
					"src": {Name: "src", Table: "src", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
						Checks: &refill.Checks{NotNull: &refill.NotNullCheck{Columns: []string{"v"}}}},
					"mid": {Name: "mid", Table: "mid", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Upstream: []string{"src"},
						Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
					"top": {Name: "top", Table: "top", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Upstream: []string{"mid"},
						Job: &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM top WHERE day = :partition; INSERT INTO top SELECT day, sum(v) FROM mid WHERE day = :partition GROUP BY day"}},
				}}
			p, err := planner.New(cfg, w.WH, st)
			if err != nil {
				t.Fatal(err)
			}
			now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
			p.Now = now
			c := &control.Control{Config: cfg, Store: st, Warehouse: w.WH, Now: now}
			r := &Runner{Config: cfg, Warehouse: w.WH, Store: st, Now: now, Backoff: 10 * time.Millisecond,
				Gate: &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st, Now: now}}
			c.Executor = r
			fn(t, &bundle{r: r, c: c, p: p, st: st, w: w, state: state})
		})
	}
}

func (b *bundle) plan(t *testing.T) *refill.Plan {
	t.Helper()
	pl, err := b.p.Plan(context.Background(), planner.Request{Targets: []string{"src"}, From: "2026-11-01", To: "2026-11-03", Reason: "test", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Approve(context.Background(), pl.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	return pl
}

func (b *bundle) top(t *testing.T) string {
	t.Helper()
	rows, err := b.w.DB.Query("SELECT day, total FROM top ORDER BY day")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		var n int
		if err := rows.Scan(&d, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, d+"="+strconv.Itoa(n))
	}
	return strings.Join(out, " ")
}

func TestApplyRunsLevelsInOrderAndReports(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		pl := b.plan(t)
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if got := b.top(t); got != "2026-11-01=3 2026-11-02=3 2026-11-03=15" {
			t.Errorf("top = %s", got)
		}
		pubs, err := b.st.Published(ctx, pl.ID)
		if err != nil || len(pubs) != 6 {
			t.Fatalf("published = %d (%v), want 6", len(pubs), err)
		}
		// Lineage order: every mid partition was published before any top.
		var lastMid, firstTop time.Time
		evs, _ := b.st.Audit(ctx, store.AuditFilter{PlanID: pl.ID})
		seqMid, seqTop := int64(0), int64(1<<62)
		for _, e := range evs {
			if e.Kind != refill.EventPartitionPublished {
				continue
			}
			if e.Dataset == "mid" && e.Seq > seqMid {
				seqMid, lastMid = e.Seq, e.At
			}
			if e.Dataset == "top" && e.Seq < seqTop {
				seqTop, firstTop = e.Seq, e.At
			}
		}
		if seqMid > seqTop || lastMid.After(firstTop) {
			t.Errorf("a top partition was published (entry %d) before the last mid one (entry %d)", seqTop, seqMid)
		}
		got, _ := b.st.Plan(ctx, pl.ID)
		rep, err := control.BuildReport(ctx, b.st, got, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != refill.StatusApplied || rep.Published != 6 || rep.Total != 6 {
			t.Errorf("report = %+v", rep)
		}
		// top 2026-11-01 held one stale row; its expectation came from
		// history, so it is flagged only if off by more than 10%.
		for _, row := range rep.Partitions {
			if row.Dataset == "mid" && (row.After.Rows != *row.Expected || row.Flagged) {
				t.Errorf("mid %s: after %d expected %d flagged %v", row.Partition, row.After.Rows, *row.Expected, row.Flagged)
			}
		}
		// Applied plans cannot be applied again.
		if err := b.c.Apply(ctx, pl.ID, "alice"); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("second apply: %v", err)
		}
		if rep, err := b.st.VerifyAudit(ctx); err != nil || !rep.OK {
			t.Errorf("audit: %+v %v", rep, err)
		}
	})
}

func TestFailedRunResumesWithoutRebuilding(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		// top's job also reads a table that does not exist yet: every
		// attempt fails until someone creates it. (It may not write it:
		// an sql job writes only its own table.)
		top := b.r.Config.Datasets["top"].Job
		top.SQL += "; SELECT count(*) FROM top_log WHERE day = :partition"
		pl := b.plan(t)
		err := b.c.Apply(ctx, pl.ID, "alice")
		if err == nil || !strings.Contains(err.Error(), "failed after its last attempt") {
			t.Fatalf("apply with a broken job: %v", err)
		}
		got, _ := b.st.Plan(ctx, pl.ID)
		if got.Status != refill.StatusFailed {
			t.Fatalf("status %s, want failed", got.Status)
		}
		if b.top(t) != "2026-11-01=99" {
			t.Errorf("a failed partition changed top: %s", b.top(t))
		}
		before, _ := b.st.Published(ctx, pl.ID)
		if len(before) != 3 {
			t.Fatalf("published before resume: %d, want the 3 mid partitions", len(before))
		}
		// Mend the warehouse, not the job (a changed job would need a new
		// plan), and resume.
		b.w.Exec(t, "CREATE TABLE top_log (day TEXT)")
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatalf("resume: %v", err)
		}
		after, _ := b.st.Published(ctx, pl.ID)
		for _, p := range after {
			for _, q := range before {
				if p.Dataset == q.Dataset && p.Partition == q.Partition && (p.Attempt != q.Attempt || !p.At.Equal(q.At)) {
					t.Errorf("%s %s was rebuilt on resume", p.Dataset, p.Partition)
				}
			}
		}
		if len(after) != 6 || b.top(t) != "2026-11-01=3 2026-11-02=3 2026-11-03=15" {
			t.Errorf("after resume: %d published, top %s", len(after), b.top(t))
		}
	})
}

func TestGateIsCheckedAgainBeforeWriting(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		pl := b.plan(t)
		b.w.Exec(t, "UPDATE src SET v = NULL WHERE day = '2026-11-02'")
		err := b.c.Apply(ctx, pl.ID, "alice")
		if !errors.Is(err, refill.ErrBlocked) {
			t.Fatalf("apply over a source broken since planning: %v", err)
		}
		got, _ := b.st.Plan(ctx, pl.ID)
		if got.Status != refill.StatusBlocked {
			t.Errorf("status %s, want blocked", got.Status)
		}
		if pubs, _ := b.st.Published(ctx, pl.ID); len(pubs) != 0 || b.top(t) != "2026-11-01=99" {
			t.Errorf("something was written: %d published, top %s", len(pubs), b.top(t))
		}
		if _, err := b.c.Approve(ctx, pl.ID, "carol", ""); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("a blocked plan could be approved: %v", err)
		}
	})
}

// TestAuditOfStagedRows gives the rebuilt dataset a check its new rows
// fail — a null ratio, its unique key, accepted values: the publish is
// rolled back, the live partition keeps its rows, and the run fails
// without retrying.
func TestAuditOfStagedRows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, query, want string
		checks            *refill.Checks
	}{
		{"not_null", "SELECT day, CASE WHEN day = '2026-11-02' THEN NULL ELSE v END AS v FROM src WHERE day = :partition",
			"not_null v", &refill.Checks{NotNull: &refill.NotNullCheck{Columns: []string{"v"}}}},
		{"unique", "SELECT day, v FROM src WHERE day = :partition UNION ALL SELECT day, v FROM src WHERE day = :partition AND day = '2026-11-02'",
			"unique day, v", &refill.Checks{Unique: []string{"day", "v"}}},
		{"accepted_values", "SELECT day, CASE WHEN day = '2026-11-02' THEN 1000 ELSE v END AS v FROM src WHERE day = :partition",
			"accepted_values v", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, b *bundle) {
				ctx := context.Background()
				b.w.Exec(t, "INSERT INTO mid VALUES ('2026-11-02', 42)")
				mid := b.r.Config.Datasets["mid"]
				mid.Job.Query = c.query
				mid.Checks = c.checks
				if mid.Checks == nil {
					var vals []string
					for i := range 100 {
						vals = append(vals, strconv.Itoa(i))
					}
					mid.Checks = &refill.Checks{AcceptedValues: &refill.AcceptedValuesCheck{Columns: []refill.AcceptedValues{{Column: "v", Values: vals}}}}
				}
				pl := b.plan(t)
				err := b.c.Apply(ctx, pl.ID, "alice")
				if err == nil || !strings.Contains(err.Error(), "the staged rows failed the dataset's checks") || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("apply: %v; want the audit to say %q", err, c.want)
				}
				var v sql.NullInt64
				if err := b.w.DB.QueryRow("SELECT v FROM mid WHERE day = '2026-11-02'").Scan(&v); err != nil || v.Int64 != 42 {
					t.Errorf("the live partition changed: %v (%v)", v, err)
				}
				pubs, _ := b.st.Published(ctx, pl.ID)
				for _, p := range pubs {
					if p.Dataset == "mid" && p.Partition == "2026-11-02" {
						t.Error("a partition that failed its audit was recorded published")
					}
					if p.Attempt > 1 {
						t.Errorf("%s %s took %d attempts", p.Dataset, p.Partition, p.Attempt)
					}
				}
			})
		})
	}
}

// TestPublishedButNotRecorded plays the crash between the publish commit
// and its record in the state store, with a job that is not idempotent:
// the resumed run must adopt the partition, not apply the job again.
func TestPublishedButNotRecorded(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		top := b.r.Config.Datasets["top"].Job
		top.SQL = "INSERT INTO top SELECT day, sum(v) FROM mid WHERE day = :partition GROUP BY day"
		b.w.Exec(t, "DELETE FROM top")
		pl := b.plan(t)
		// An earlier attempt published top 2026-11-02 and died.
		b.w.Exec(t, "INSERT INTO mid SELECT day, v FROM src WHERE day = '2026-11-02'")
		tr := b.r.Warehouse.(refill.Transactor)
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if _, err := tx.MarkPublished(ctx, pl.ID, "top", "2026-11-02"); err != nil {
				return err
			}
			return tx.ExecSQL(ctx, b.r.Config.Datasets["top"].Ref(), top.SQL, "2026-11-02")
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := b.w.DB.QueryRow("SELECT count(*) FROM top WHERE day = '2026-11-02'").Scan(&n); err != nil || n != 1 {
			t.Errorf("top 2026-11-02 has %d rows (%v): the job ran again over its own publish", n, err)
		}
		pubs, _ := b.st.Published(ctx, pl.ID)
		adopted := 0
		for _, p := range pubs {
			if p.Dataset == "top" && p.Partition == "2026-11-02" {
				adopted++
				if p.Before != nil || p.After == nil || p.After.Rows != 1 || !strings.Contains(p.Output, "recorded now, not rebuilt") {
					t.Errorf("adopted record = %+v", p)
				}
			}
		}
		if adopted != 1 || len(pubs) != 6 {
			t.Errorf("published %d (adopted %d), want 6 with 1 adopted", len(pubs), adopted)
		}
	})
}
