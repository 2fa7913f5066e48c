// Package proof shows, by running a job, whether it is safe to rerun. A
// partition is built over its existing rows, built again, then emptied and
// built from nothing; after each build its row count and content checksum
// are taken. Only when all three agree is the job proven for its current
// definition (its fingerprint).
//
// That catches the two failures that matter: a rerun that adds rows (a
// plain INSERT), and a job whose result depends on what was there before (an
// INSERT OR IGNORE that keeps stale rows and so can never repair them).
package proof

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs"
	"github.com/refill-dev/refill/policy"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Build names, in the order they run.
const (
	BuildExisting = "over existing rows"
	BuildAgain    = "again"
	BuildStale    = "over a stale partition"
	BuildEmpty    = "from empty"
)

// Failure kinds.
const (
	FailAddsRows       = "rerun_adds_rows"
	FailDependsOnPrior = "depends_on_prior"
	FailChangesContent = "rerun_changes_content"
	FailOutside        = "writes_outside_partition"
	FailBuild          = "build_failed"
	FailRefused        = "reaches_outside_its_transaction"
)

// Prover runs proofs and records their evidence.
type Prover struct {
	Config    *refill.Config
	Warehouse refill.Warehouse
	Store     Saver
	Now       refill.Clock
	// OpenCommands opens where command jobs are built (proof_warehouse,
	// package proof/scratch) for one proof, which closes it after; nil
	// means command jobs cannot be proven here. Opening it per proof keeps
	// a core that never proves a command job from ever touching it.
	OpenCommands func(ctx context.Context) (CommandRunner, error)
}

// Saver records a proof's evidence; *store.Store implements it.
type Saver interface {
	SaveProof(ctx context.Context, p *refill.Proof) error
}

// Reader lists a dataset's proofs, newest first; *store.Store implements it.
type Reader interface {
	Proofs(ctx context.Context, dataset string) ([]refill.Proof, error)
}

// CommandRunner runs a command job for one partition against a warehouse
// and empties partitions there; the proof warehouse implements it.
type CommandRunner interface {
	Run(ctx context.Context, d *refill.Dataset, partition string) error
	Delete(ctx context.Context, t refill.TableRef, partition string) error
	Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error)
	// Spoil makes the partition deliberately stale (refill.WarehouseTx.Spoil).
	Spoil(ctx context.Context, t refill.TableRef, partition string) (what string, changed bool, err error)
	// Seed copies the partition of each of the job's declared upstreams
	// from the warehouse into the proof warehouse, so the job builds from
	// real inputs; it returns how many rows it copied.
	Seed(ctx context.Context, d *refill.Dataset, partition string) (int64, error)
	// Name says where the builds run, for the evidence.
	Name() string
	// Close releases it when the proof is done.
	Close() error
}

// Prove proves one dataset's job on one partition and stores the evidence.
// A failing proof is stored too, and returned with an error wrapping
// refill.ErrVerification.
func (p *Prover) Prove(ctx context.Context, dataset, partition, actor string) (*refill.Proof, error) {
	d, ok := p.Config.Datasets[dataset]
	if !ok {
		return nil, refill.NotFoundf("unknown dataset %q (known: %s)", dataset, strings.Join(p.Config.DatasetNames(), ", "))
	}
	if d.IsSource() {
		return nil, refill.BadInputf("%s is a source: refill never rewrites it, so there is no job to prove", dataset)
	}
	ref := d.Ref()
	if _, err := refill.PartitionTime(partition, ref.Grain); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	if d.Table == "" {
		return nil, refill.BadInputf("%s has no table: a proof compares the partition's rows, so give the dataset a table", dataset)
	}
	if d.Job.SideEffects {
		return nil, refill.BadInputf("%s declares side_effects: it writes outside the warehouse, so refill never proves it by running it three times, and it is never auto; a person approves each run", dataset)
	}
	pr := &refill.Proof{Dataset: dataset, Partition: partition, Kind: d.Job.Kind, Fingerprint: d.Job.Fingerprint(),
		ProvenBy: actor, ProvenAt: p.Now.Now(), Method: refill.ProofMethod}

	jr, err := jobs.For(d.Job.Kind, jobs.Deps{})
	switch {
	case err == nil && jr.Transactional():
		pr.Warehouse = "warehouse (one transaction, rolled back)"
		err = p.rehearse(ctx, jr, d, ref, partition, pr)
	case d.Job.Kind == refill.JobCommand:
		// A command writes where it is told (REFILL_WAREHOUSE), so it can
		// be told to write to the proof warehouse; a DAG writes where its
		// own connections say.
		if p.OpenCommands == nil {
			return nil, refill.BadInputf("%s has a command job: it is proven against a scratch warehouse, never the production one; set proof_warehouse: in %s", dataset, p.Config.Name())
		}
		var c CommandRunner
		if c, err = p.OpenCommands(ctx); err != nil {
			return nil, err
		}
		defer c.Close()
		pr.Warehouse = c.Name()
		err = p.runCommand(ctx, c, d, ref, partition, pr)
	default:
		return nil, refill.BadInputf("%s has an %s job: proving it needs proof_warehouse: and a DAG that writes there; this version proves query, sql and command jobs", dataset, d.Job.Kind)
	}
	if fault := jobFault(err); fault != "" {
		// The job itself failed a build: that is a verdict on the job, and
		// it is recorded like any other failed proof.
		pr.Failure, pr.Message = fault, err.Error()
		err = nil
	} else if err != nil {
		return nil, err
	} else if err := judge(pr); err != nil {
		return nil, err
	}
	if err := p.Store.SaveProof(ctx, pr); err != nil {
		return nil, fmt.Errorf("storing proof: %w", err)
	}
	if !pr.Passed {
		return pr, fmt.Errorf("%w: %s: %s", refill.ErrVerification, dataset, pr.Message)
	}
	return pr, nil
}

// rehearse builds four times inside one warehouse transaction that is
// always rolled back, so the warehouse ends exactly as it began. Each build
// is jr, the same runner a run uses (jobs.For).
func (p *Prover) rehearse(ctx context.Context, jr refill.JobRunner, d *refill.Dataset, ref refill.TableRef, partition string, pr *refill.Proof) error {
	reh := p.Warehouse
	build := func(tx refill.WarehouseTx) error {
		_, err := jr.Build(ctx, tx, d, refill.JobRun{Partition: partition})
		return err
	}
	return reh.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		for _, name := range []string{BuildExisting, BuildAgain, BuildStale, BuildEmpty} {
			switch name {
			case BuildStale:
				what, _, err := tx.Spoil(ctx, ref, partition)
				if err != nil {
					return fmt.Errorf("making %s %s stale: %w", d.Name, partition, err)
				}
				pr.Spoiled = what
			case BuildEmpty:
				if _, err := tx.DeletePartition(ctx, ref, partition); err != nil {
					return fmt.Errorf("emptying %s %s: %w", d.Name, partition, err)
				}
			}
			if err := build(tx); err != nil {
				return fmt.Errorf("building %s %s (%s): %w", d.Name, partition, name, err)
			}
			dg, err := tx.Digest(ctx, ref, partition)
			if err != nil {
				return fmt.Errorf("checksum of %s %s: %w", d.Name, partition, err)
			}
			pr.Builds = append(pr.Builds, refill.ProofBuild{Build: name, Digest: dg})
		}
		return nil
	})
}

// runCommand builds four times in the proof warehouse, where writes are
// real: the command is an outside process.
func (p *Prover) runCommand(ctx context.Context, c CommandRunner, d *refill.Dataset, ref refill.TableRef, partition string, pr *refill.Proof) error {
	if _, err := c.Seed(ctx, d, partition); err != nil {
		return fmt.Errorf("copying the inputs of %s %s into %s: %w", d.Name, partition, c.Name(), err)
	}
	for _, name := range []string{BuildExisting, BuildAgain, BuildStale, BuildEmpty} {
		switch name {
		case BuildStale:
			what, _, err := c.Spoil(ctx, ref, partition)
			if err != nil {
				return fmt.Errorf("making %s %s stale in %s: %w", d.Name, partition, c.Name(), err)
			}
			pr.Spoiled = what
		case BuildEmpty:
			if err := c.Delete(ctx, ref, partition); err != nil {
				return fmt.Errorf("emptying %s %s in %s: %w", d.Name, partition, c.Name(), err)
			}
		}
		if err := c.Run(ctx, d, partition); err != nil {
			return fmt.Errorf("building %s %s (%s): %w", d.Name, partition, name, err)
		}
		dg, err := c.Digest(ctx, ref, partition)
		if err != nil {
			return fmt.Errorf("checksum of %s %s in %s: %w", d.Name, partition, c.Name(), err)
		}
		pr.Builds = append(pr.Builds, refill.ProofBuild{Build: name, Digest: dg})
	}
	return nil
}

// jobFault names the failure when a build failed because of the job itself
// — a row outside its partition, a statement the warehouse refused (one
// that tried to end refill's transaction or attach a database, say) — and
// "" for anything else (an unreachable warehouse proves nothing either way).
func jobFault(err error) string {
	if err == nil {
		return ""
	}
	var outside *refill.OutsidePartitionError
	var refused *sqltext.RefusedError
	var stmt *sqltext.StatementError
	var query *sqltext.QueryError
	switch {
	case errors.As(err, &outside):
		return FailOutside
	case errors.As(err, &refused):
		return FailRefused
	case errors.As(err, &stmt), errors.As(err, &query):
		return FailBuild
	}
	return ""
}

// judge sets the verdict from the four digests. A partition with no rows
// in any build proves nothing and is refused, not passed.
func judge(pr *refill.Proof) error {
	if len(pr.Builds) != 4 {
		return fmt.Errorf("proof of %s: %d builds, want 4", pr.Dataset, len(pr.Builds))
	}
	a, b, s, c := pr.Builds[0].Digest, pr.Builds[1].Digest, pr.Builds[2].Digest, pr.Builds[3].Digest
	if a.Rows == 0 && b.Rows == 0 && s.Rows == 0 && c.Rows == 0 {
		return refill.BadInputf("%s %s has no rows in any build: an empty result proves nothing; prove a partition whose inputs have data", pr.Dataset, pr.Partition)
	}
	switch {
	case b.Rows > a.Rows:
		pr.Failure = FailAddsRows
		pr.Message = fmt.Sprintf("a rerun adds rows: %s after the first build, %s after the second (+%s); the job appends instead of replacing (a plain INSERT?)",
			humanize.Comma(a.Rows), humanize.Comma(b.Rows), humanize.Comma(b.Rows-a.Rows))
	case a != b:
		// Checked before the stale build: two builds over the same rows
		// that disagree say the job is not deterministic (random(), now(),
		// an unordered LIMIT), whatever the stale build then shows.
		pr.Failure = FailChangesContent
		pr.Message = fmt.Sprintf("a rerun changes the content: %s rows (checksum %s), then %s rows (checksum %s); the job is not deterministic (random(), the clock, an unordered LIMIT?)",
			humanize.Comma(a.Rows), a.Checksum, humanize.Comma(b.Rows), b.Checksum)
	case s != c:
		pr.Failure = FailDependsOnPrior
		pr.Message = fmt.Sprintf("the result depends on what was there before: over a deliberately stale partition (%s) the build gives %s rows (checksum %s), from empty %s rows (checksum %s); stale rows or values survive a rebuild (an INSERT OR IGNORE, an upsert that keeps old columns?)",
			pr.Spoiled, humanize.Comma(s.Rows), s.Checksum, humanize.Comma(c.Rows), c.Checksum)
	case c != b:
		pr.Failure = FailDependsOnPrior
		pr.Message = fmt.Sprintf("the result depends on what was there before: built from empty the partition has %s rows (checksum %s), built over its existing rows %s (checksum %s); stale rows survive a rebuild (an INSERT OR IGNORE / ON CONFLICT DO NOTHING?)",
			humanize.Comma(c.Rows), c.Checksum, humanize.Comma(b.Rows), b.Checksum)
	default:
		pr.Passed = true
		pr.Message = fmt.Sprintf("all four builds agree, including one over a deliberately stale partition (%s): %s rows, checksum %s", pr.Spoiled, humanize.Comma(a.Rows), a.Checksum)
	}
	return nil
}

// Status tells the policy whether a dataset's job is proven for its current
// definition. Any failed proof of this fingerprint decides: a job shown
// once to depend on prior state stays failing until it changes, however
// many later proofs on other partitions pass.
type Status struct {
	Store Reader
}

// ProofStatus implements planner.ProofSource.
func (s Status) ProofStatus(ctx context.Context, dataset, fingerprint string) (policy.Evidence, error) {
	proofs, err := s.Store.Proofs(ctx, dataset)
	if err != nil {
		return policy.Evidence{}, err
	}
	var out policy.Evidence
	for _, pr := range proofs { // newest first
		if pr.Passed {
			out.Exists = true
		}
		if pr.Fingerprint != fingerprint {
			continue
		}
		switch {
		case !pr.Passed:
			return policy.Evidence{Exists: out.Exists, Failed: true,
				Message: fmt.Sprintf("%s (proven on %s by %s; a failing proof stays failing until the job changes)", pr.Message, pr.Partition, pr.ProvenBy)}, nil
		case pr.Method >= refill.ProofMethod && !out.Current:
			out.Current, out.Message = true, pr.Message
		}
	}
	return out, nil
}
