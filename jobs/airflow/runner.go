package airflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// Runner runs airflow jobs for refill: one DAG run per partition and run
// of a plan.
type Runner struct {
	Client *Client
	// Dir is the config's directory, which a job's credential files are
	// relative to.
	Dir string
}

var _ refill.JobRunner = Runner{}

// RunID names the DAG run of one partition in one run of a plan: fixed, so
// that a retry within the run (after a crash, or a lost connection) finds
// the DAG run it started instead of starting a second; and carrying the
// run, so that a resumed plan starts afresh rather than read back an old
// run's failure.
func RunID(planID, dataset, partition string, run int) string {
	return fmt.Sprintf("refill__%s__%s__%s__r%d", planID, dataset, partition, run)
}

// Transactional is false: a DAG run writes on its own.
func (Runner) Transactional() bool { return false }

// Build marks the DAG runs of the plan's earlier runs failed — a resumed
// plan starts a fresh DAG run, and nothing it abandoned may write on — then
// triggers this run's DAG run, with the partition's bounds as
// conf.start_date and conf.end_date, and waits for it to end.
func (r Runner) Build(ctx context.Context, _ refill.WarehouseTx, d *refill.Dataset, run refill.JobRun) (string, error) {
	if r.Client == nil {
		return "", errors.New("an airflow job runs only with an Airflow client")
	}
	g := d.Ref().Grain
	start, err := refill.PartitionTime(run.Partition, g)
	if err != nil {
		return "", err
	}
	end := start.AddDate(0, 0, 1)
	if g == refill.GrainHour {
		end = start.Add(time.Hour)
	}
	job := d.Job.Airflow.In(r.Dir)
	for old := 1; old < run.Run; old++ {
		if err := r.Client.Fail(ctx, job, RunID(run.PlanID, d.Name, run.Partition, old),
			fmt.Sprintf("refill resumed plan %s as run %d; this DAG run of run %d was abandoned", run.PlanID, run.Run, old)); err != nil {
			return "", fmt.Errorf("marking the DAG run of run %d failed before starting a fresh one: %w", old, err)
		}
	}
	res, err := r.Client.Run(ctx, job, RunID(run.PlanID, d.Name, run.Partition, run.Run), start.Format(time.RFC3339), end.Format(time.RFC3339))
	return fmt.Sprintf("dag %s run %s: %s after %d polls (created: %v)", d.Job.Airflow.DagID, res.DagRunID, res.State, res.Polls, res.Created), err
}
