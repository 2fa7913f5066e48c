// Package query runs the job kinds that live inside refill's warehouse
// transaction: query jobs (a SELECT of one partition's rows; refill owns
// the write) and sql jobs (statements the user owns, confined by the
// warehouse to their own table and partition).
package query

import (
	"context"
	"errors"
	"fmt"

	"github.com/refill-dev/refill"
)

// Runner builds query and sql jobs.
type Runner struct{}

var _ refill.JobRunner = Runner{}

// Transactional is true: the build happens in the caller's transaction.
func (Runner) Transactional() bool { return true }

// Build rebuilds run.Partition of d inside tx.
func (Runner) Build(ctx context.Context, tx refill.WarehouseTx, d *refill.Dataset, run refill.JobRun) (string, error) {
	if tx == nil {
		return "", errors.New("a query or sql job builds only inside a warehouse transaction")
	}
	ref := d.Ref()
	switch d.Job.Kind {
	case refill.JobQuery:
		n, err := tx.ReplaceFromQuery(ctx, ref, d.Job.Query, run.Partition)
		return fmt.Sprintf("%d rows inserted", n), err
	case refill.JobSQL:
		return "", tx.ExecSQL(ctx, ref, d.Job.SQL, run.Partition)
	}
	return "", fmt.Errorf("dataset %s: a %s job is not a query or sql job", d.Name, d.Job.Kind)
}
