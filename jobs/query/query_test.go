package query

import (
	"context"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
)

// TestRunnerBuildsInTheCallersTransaction: a query job replaces its
// partition and an sql job runs, both in the transaction they are given
// and nowhere else; a command job is not this runner's.
func TestRunnerBuildsInTheCallersTransaction(t *testing.T) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		w.Exec(t, "CREATE TABLE src (day TEXT, v INTEGER)", "INSERT INTO src VALUES ('2026-11-02', 1), ('2026-11-02', 2)",
			"CREATE TABLE agg (day TEXT, total INTEGER)")
		ds := func(j *refill.Job) *refill.Dataset {
			return &refill.Dataset{Name: "agg", Table: "agg", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Job: j}
		}
		run := refill.JobRun{Partition: "2026-11-02"}
		ctx := context.Background()
		for _, j := range []*refill.Job{
			{Kind: refill.JobQuery, Query: "SELECT day, sum(v) AS total FROM src WHERE day = :partition GROUP BY day"},
			{Kind: refill.JobSQL, SQL: "DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day"},
		} {
			err := w.WH.(refill.Rehearser).Rehearse(ctx, func(tx refill.WarehouseTx) error {
				if _, err := (Runner{}).Build(ctx, tx, ds(j), run); err != nil {
					return err
				}
				dg, err := tx.Digest(ctx, ds(j).Ref(), run.Partition)
				if err == nil && dg.Rows != 1 {
					t.Errorf("%s job built %d rows, want 1", j.Kind, dg.Rows)
				}
				return err
			})
			if err != nil {
				t.Fatalf("%s job: %v", j.Kind, err)
			}
		}
		if _, err := (Runner{}).Build(ctx, nil, ds(&refill.Job{Kind: refill.JobQuery, Query: "SELECT :partition AS day"}), run); err == nil {
			t.Error("a query job built outside a transaction")
		}
		if _, err := (Runner{}).Build(ctx, dummyTx{}, ds(&refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}), run); err == nil || !strings.Contains(err.Error(), "not a query or sql job") {
			t.Errorf("a command job through the query runner: %v", err)
		}
	})
}

// dummyTx is a transaction the runner must not touch.
type dummyTx struct{ refill.WarehouseTx }
