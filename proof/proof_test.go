package proof

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/store"
)

// setup gives a prover over a real warehouse with a source `src` (3 rows on
// 2026-11-02) and an empty-schema target `agg`, and a state store.
func setup(t *testing.T, w *whtest.Warehouse, job *refill.Job) (*Prover, *store.Store) {
	t.Helper()
	w.Exec(t,
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"INSERT INTO src VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-03', 9)",
		"CREATE TABLE agg (day TEXT PRIMARY KEY, total INTEGER)",
	)
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := &refill.Config{Datasets: map[string]*refill.Dataset{
		"src": {Name: "src", Table: "src", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}},
		"agg": {Name: "agg", Table: "agg", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Upstream: []string{"src"}, Job: job},
	}}
	return &Prover{Config: cfg, Warehouse: w.WH, Store: st, Now: func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }}, st
}

// digestAll is the whole agg table's state, to show a proof left no trace.
func digestAll(t *testing.T, w *whtest.Warehouse) string {
	t.Helper()
	rows, err := w.DB.Query("SELECT day, total FROM agg ORDER BY day")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var d string
		var v int64
		if err := rows.Scan(&d, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d;", d, v)
	}
	return b.String()
}

func TestVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		job     func(w *whtest.Warehouse) *refill.Job
		stale   bool // agg holds a stale row for the partition before the proof
		passed  bool
		failure string
		msg     string
	}{
		{"query job passes", func(*whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day = :partition GROUP BY day"}
		}, true, true, "", "all four builds agree, including one over a deliberately stale partition (changed 1 row): 1 rows"},
		{"delete then insert passes", func(*whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day"}
		}, true, true, "", "all four builds agree"},
		{"plain insert doubles", func(*whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobSQL, SQL: "INSERT INTO agg_log SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day"}
		}, false, false, FailAddsRows, "a rerun adds rows: 1 after the first build, 2 after the second (+1)"},
		{"insert or ignore keeps stale rows", func(w *whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobSQL, SQL: w.Pick(
				"INSERT OR IGNORE INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day",
				"INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day ON CONFLICT DO NOTHING")}
		}, true, false, FailDependsOnPrior, "the result depends on what was there before"},
		// Proven on a healthy partition (no stale row planted), a job that
		// keeps what it finds is caught by the deliberately stale build.
		{"insert or ignore on a healthy partition", func(w *whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobSQL, SQL: w.Pick(
				"INSERT OR IGNORE INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day",
				"INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day ON CONFLICT DO NOTHING")}
		}, false, false, FailDependsOnPrior, "over a deliberately stale partition (changed 1 row)"},
		{"a random job is called not deterministic", func(w *whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobQuery, Query: w.Pick(
				"SELECT day, sum(v) + abs(random() % 1000000) AS total FROM src WHERE day = :partition GROUP BY day",
				"SELECT day, sum(v) + floor(random() * 1000000)::int AS total FROM src WHERE day = :partition GROUP BY day")}
		}, false, false, FailChangesContent, "not deterministic"},
		{"query job writing outside its partition", func(w *whtest.Warehouse) *refill.Job {
			return &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day IN (:partition, '2026-11-03') GROUP BY day"}
		}, false, false, FailOutside, "2026-11-03"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
				job := c.job(w)
				p, st := setup(t, w, job)
				if strings.Contains(job.SQL, "agg_log") {
					// A log-style table with no key: appends pile up.
					w.Exec(t, "CREATE TABLE agg_log (day TEXT, total INTEGER)")
					p.Config.Datasets["agg"].Table = "agg_log"
				}
				if c.stale {
					w.Exec(t, "INSERT INTO agg VALUES ('2026-11-02', 5)")
				}
				before := digestAll(t, w)
				pr, err := p.Prove(context.Background(), "agg", "2026-11-02", "alice")
				if pr == nil {
					t.Fatalf("no proof: %v", err)
				}
				if pr.Passed != c.passed || pr.Failure != c.failure || !strings.Contains(pr.Message, c.msg) {
					t.Errorf("proof = passed %v failure %q %q; want %v %q containing %q", pr.Passed, pr.Failure, pr.Message, c.passed, c.failure, c.msg)
				}
				if c.passed != (err == nil) || (!c.passed && !errors.Is(err, refill.ErrVerification)) {
					t.Errorf("err = %v, want verification failure only when the proof fails", err)
				}
				if after := digestAll(t, w); after != before {
					t.Errorf("the proof changed the warehouse: %q -> %q", before, after)
				}
				stored, err := st.Proofs(context.Background(), "agg")
				if err != nil || len(stored) != 1 || stored[0].Passed != c.passed || stored[0].Fingerprint != job.Fingerprint() || stored[0].ProvenBy != "alice" {
					t.Errorf("stored evidence = %+v (%v)", stored, err)
				}
				if c.failure != FailOutside && (len(pr.Builds) != 4 || pr.Builds[2].Build != BuildStale || pr.Builds[3].Build != BuildEmpty) {
					t.Errorf("builds = %+v", pr.Builds)
				}
			})
		})
	}
}

func TestStatusFollowsTheFingerprint(t *testing.T) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		job := &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day = :partition GROUP BY day"}
		p, st := setup(t, w, job)
		ctx := context.Background()
		s := Status{Store: st}
		if got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint()); got.Exists || got.Current {
			t.Errorf("before any proof: %+v", got)
		}
		if _, err := p.Prove(ctx, "agg", "2026-11-02", "alice"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint()); !got.Current {
			t.Errorf("after a passing proof: %+v", got)
		}
		job.Query += " -- edited"
		if got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint()); got.Current || !got.Exists {
			t.Errorf("after the job changed the proof must be stale: %+v", got)
		}
	})
}

func TestBadInputStoresNothing(t *testing.T) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		p, st := setup(t, w, &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day = :partition GROUP BY day"})
		ctx := context.Background()
		for _, c := range []struct{ dataset, partition, want string }{
			{"src", "2026-11-02", "is a source"},
			{"nope", "2026-11-02", `unknown dataset "nope"`},
			{"agg", "2026-11-31", `"2026-11-31" is not a valid day partition`},
			{"agg", "2026-10-01", "no rows in any build"},
		} {
			_, err := p.Prove(ctx, c.dataset, c.partition, "alice")
			if refill.ExitCode(err) != refill.ExitBadInput || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: err = %v, want bad input with %q", c.dataset, c.partition, err, c.want)
			}
		}
		if got, _ := st.Proofs(ctx, "agg"); len(got) != 0 {
			t.Errorf("bad input stored %d proofs", len(got))
		}
	})
}

// TestInterruptedProofLeavesNoTrace stops a proof halfway — a statement
// that fails after the first build wrote, and a cancelled context — and
// checks the warehouse is exactly as it was. The failing statement is the
// job's own fault, so it is recorded as a failed proof; the cancellation
// says nothing about the job and records nothing.
func TestInterruptedProofLeavesNoTrace(t *testing.T) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		p, st := setup(t, w, &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day; INSERT INTO no_such_table VALUES (1)"})
		w.Exec(t, "INSERT INTO agg VALUES ('2026-11-02', 5), ('2026-11-03', 7)")
		before := digestAll(t, w)
		ctx := context.Background()
		if _, err := p.Prove(ctx, "agg", "2026-11-02", "alice"); err == nil {
			t.Fatal("a failing statement proved the job")
		}
		if after := digestAll(t, w); after != before {
			t.Errorf("a failed proof changed the warehouse: %q -> %q", before, after)
		}
		p.Config.Datasets["agg"].Job.SQL = "DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day"
		cctx, cancel := context.WithCancel(ctx)
		p.Now = func() time.Time { cancel(); return time.Now() } // cancelled before the builds run
		if _, err := p.Prove(cctx, "agg", "2026-11-02", "alice"); err == nil {
			t.Fatal("a cancelled proof passed")
		}
		if after := digestAll(t, w); after != before {
			t.Errorf("a cancelled proof changed the warehouse: %q -> %q", before, after)
		}
		if got, _ := st.Proofs(ctx, "agg"); len(got) != 1 || got[0].Passed || got[0].Failure != FailBuild {
			t.Errorf("stored evidence = %+v, want only the broken job's failed proof", got)
		}
	})
}

// TestCommandJobNeedsProofWarehouse checks a command job is never proven
// against the production warehouse.
func TestCommandJobNeedsProofWarehouse(t *testing.T) {
	w := whtest.Open(t, "sqlite")
	p, _ := setup(t, w, &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}})
	_, err := p.Prove(context.Background(), "agg", "2026-11-02", "alice")
	if refill.ExitCode(err) != refill.ExitBadInput || !strings.Contains(err.Error(), "set proof_warehouse:") {
		t.Errorf("err = %v", err)
	}
}

// TestFailingProofStaysFailing: one failed proof of a job decides until
// the job changes; a later pass on another partition does not erase it,
// and passes recorded by an older refill (no stale-partition build) are
// not current evidence.
func TestFailingProofStaysFailing(t *testing.T) {
	w := whtest.Open(t, "sqlite")
	job := &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day = :partition GROUP BY day"}
	_, st := setup(t, w, job)
	ctx := context.Background()
	save := func(partition string, passed bool, method int) {
		t.Helper()
		if err := st.SaveProof(ctx, &refill.Proof{Dataset: "agg", Partition: partition, Kind: job.Kind, Fingerprint: job.Fingerprint(),
			Passed: passed, Message: "m " + partition, ProvenBy: "alice", ProvenAt: time.Now(), Method: method}); err != nil {
			t.Fatal(err)
		}
	}
	s := Status{Store: st}
	save("2026-11-01", true, 0)
	if got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint()); got.Current || !got.Exists {
		t.Errorf("a pass from before stale-partition builds counts as current: %+v", got)
	}
	save("2026-11-02", false, refill.ProofMethod)
	save("2026-11-03", true, refill.ProofMethod)
	got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint())
	if !got.Failed || got.Current || !strings.Contains(got.Message, "2026-11-02") {
		t.Errorf("after fail then pass: %+v, want failed naming 2026-11-02", got)
	}
	job.Query += " -- fixed"
	save("2026-11-03", true, refill.ProofMethod)
	if got, _ := s.ProofStatus(ctx, "agg", job.Fingerprint()); got.Failed || !got.Current {
		t.Errorf("the changed job's own pass: %+v", got)
	}
}
