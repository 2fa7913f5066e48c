// Package jobs chooses the one refill.JobRunner of a job kind. Runs,
// proofs and the planner's rehearsal all take their runner from For, so
// each kind is implemented once, in its own package: jobs/query (query and
// sql, inside refill's warehouse transaction), jobs/command (a child
// process) and jobs/airflow (a DAG run).
package jobs

import (
	"fmt"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/jobs/command"
	"github.com/refill-dev/refill/jobs/query"
)

// Deps is what the runners need from the process that runs them. The
// zero Deps is enough to ask a runner whether it is transactional, and to
// build query and sql jobs.
type Deps struct {
	// Dir is the config's directory: where a command runs and its relative
	// argv[0] resolves.
	Dir string
	// WorkDir, when set, is where a command runs instead of Dir: a proof's
	// scratch directory, so that files a command writes never overwrite the
	// real ones.
	WorkDir string
	// Hidden names variables of refill's environment that a command never
	// sees: refill's own secrets (secret.Hidden).
	Hidden []string
	// EnvKey is the key of plans' digests of passed-through values
	// (command.EnvSeal).
	EnvKey []byte
	// Withheld holds the variables refill dropped from its environment
	// that a command may still be given by name (secret.Withheld).
	Withheld map[string]string
	// User is who commands run as (run.job_user); nil is refill's user.
	User *refill.JobUser
	// Airflow triggers and follows DAG runs. A process shares one client
	// among all its jobs, so that every partition uses one Airflow 3
	// token; without one, airflow jobs cannot run.
	Airflow *airflow.Client
}

// DepsOf is what a process gives the runners of cfg's jobs: where
// commands run, what of refill's secrets they are never and may still be
// given, and who they run as.
func DepsOf(cfg *refill.Config) Deps {
	return Deps{Dir: cfg.Dir, Hidden: secret.Hidden(cfg), Withheld: secret.Withheld(cfg), User: cfg.Run.JobUser}
}

// For returns the runner of kind's jobs.
func For(kind refill.JobKind, deps Deps) (refill.JobRunner, error) {
	switch kind {
	case refill.JobQuery, refill.JobSQL:
		return query.Runner{}, nil
	case refill.JobCommand:
		return command.Runner{Dir: deps.Dir, WorkDir: deps.WorkDir, Hidden: deps.Hidden, EnvKey: deps.EnvKey, Withheld: deps.Withheld, User: deps.User}, nil
	case refill.JobAirflow:
		return airflow.Runner{Client: deps.Airflow, Dir: deps.Dir}, nil
	}
	return nil, fmt.Errorf("%s jobs cannot run in this version", kind)
}
