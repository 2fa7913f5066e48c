package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs/airflow"
)

// Airflow DAG run states that matter here. Any other state (queued,
// running, or one a later Airflow adds) is a run under way: not a gap.
const (
	dagRunFailed = "failed"
)

// AirflowRuns is a Watcher.DAGRuns that asks Airflow, through c, for the
// DAG runs of an airflow dataset and reports, among the partitions of
// [from, to], those whose latest DAG run failed and those no DAG run ever
// covered.
//
// A run covers the partition holding the start of the data it processes
// (airflow.DAGRun.IntervalStart), in UTC, at the dataset's grain: the
// conf.start_date refill's own runs carry, else the run's data interval
// start, else its logical date. Of the runs covering one partition the
// one that began last (airflow.DAGRun.Began) decides: failed is failed;
// success, queued, running are not. A failed scheduled run that a rerun —
// refill's, or a person's — fixed is therefore not failed.
//
// Runs are listed from the first partition on with no end: refill's own
// runs, triggered after the fact, have their trigger time as logical date
// (Airflow 2) or none (Airflow 3, listed by trigger time).
//
// dir is the config's directory, which a job's credential files
// (username_file, password_file) are relative to.
func AirflowRuns(c *airflow.Client, dir string) func(ctx context.Context, d *refill.Dataset, from, to string) (failed, missing []string, err error) {
	return func(ctx context.Context, d *refill.Dataset, from, to string) ([]string, []string, error) {
		if d == nil || d.Job == nil || d.Job.Kind != refill.JobAirflow || d.Job.Airflow == nil {
			name := ""
			if d != nil {
				name = d.Name
			}
			return nil, nil, fmt.Errorf("dataset %q has no airflow job", name)
		}
		g := d.Ref().Grain
		start, err := refill.PartitionTime(from, g)
		if err != nil {
			return nil, nil, err
		}
		end, err := refill.PartitionTime(to, g)
		if err != nil {
			return nil, nil, err
		}
		runs, err := c.DAGRuns(ctx, d.Job.Airflow.In(dir), start, time.Time{})
		if err != nil {
			return nil, nil, err
		}
		latest := map[string]airflow.DAGRun{}
		for _, r := range runs {
			at := r.IntervalStart()
			if at.IsZero() {
				continue // an Airflow 3 manual run with no dates: nothing to place
			}
			p := refill.FormatPartition(at, g)
			// Listed in creation order: on a tie the later-created run wins.
			if cur, ok := latest[p]; !ok || !r.Began().Before(cur.Began()) {
				latest[p] = r
			}
		}
		var failed, missing []string
		for t := start; !t.After(end); t = next(t, g) {
			p := refill.FormatPartition(t, g)
			switch r, ok := latest[p]; {
			case !ok:
				missing = append(missing, p)
			case r.State == dagRunFailed:
				failed = append(failed, p)
			}
		}
		return failed, missing, nil
	}
}

// next is the partition after t at grain g.
func next(t time.Time, g refill.Grain) time.Time {
	if g == refill.GrainHour {
		return t.Add(time.Hour)
	}
	return t.AddDate(0, 0, 1)
}
