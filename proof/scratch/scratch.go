// Package scratch is proof_warehouse: the scratch warehouse command jobs
// are proven against. A command is an outside process whose writes cannot
// be rolled back, so refill never proves one on the production warehouse;
// it copies the job's declared inputs here, tells the command to write here
// (REFILL_WAREHOUSE), and empties and checksums partitions here.
//
// Every front door reaches it through project.Wire, which gives the prover
// Opener; none opens it itself.
package scratch

import (
	"context"
	"fmt"
	"os"

	"github.com/refill-dev/refill"
	dsnpkg "github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/jobs"
	"github.com/refill-dev/refill/proof"
	"github.com/refill-dev/refill/warehouse"
)

var _ proof.CommandRunner = (*Warehouse)(nil)

// Warehouse is an open proof_warehouse, for one proof.
type Warehouse struct {
	wh      refill.Warehouse
	src     refill.Warehouse // the warehouse the job's inputs are copied from
	cfg     *refill.Config
	dsn     string // the proof warehouse, as a command is told it
	scratch string // the commands' working directory, removed on Close
	unlock  func() // lets the next proof on this proof warehouse go
}

// Open opens cfg's proof_warehouse, whose command jobs' inputs are copied
// from src, and a working directory for the commands, so that files a job
// writes (an export) never overwrite the real ones. Close releases both.
func Open(ctx context.Context, cfg *refill.Config, src refill.Warehouse) (*Warehouse, error) {
	if cfg.ProofWarehouse == "" {
		return nil, refill.BadInputf("no proof_warehouse: in %s: command jobs are proven against a scratch warehouse, never the production one", cfg.Name())
	}
	// The password refill connects with, which a command job is told
	// too (REFILL_WAREHOUSE).
	dsn := secret.Reader{}.DSN(cfg.ProofWarehouse)
	wh, err := warehouse.Open(ctx, dsn, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("proof_warehouse: %w", err)
	}
	path, isFile := dsnpkg.SQLitePath(dsn, cfg.Dir)
	if isFile {
		dsn = "sqlite:" + path
	} else if path, isFile = dsnpkg.DuckDBPath(dsn, cfg.Dir); isFile {
		dsn = "duckdb:" + path
	}
	unlock, err := lock(ctx, wh, path)
	if err != nil {
		wh.Close()
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "refill-proof-")
	if err == nil && cfg.Run.JobUser != nil && os.Geteuid() == 0 {
		// Commands run there as run.job_user, who must write it.
		err = os.Chown(scratch, int(cfg.Run.JobUser.UID), int(cfg.Run.JobUser.GID))
	}
	if err != nil {
		os.RemoveAll(scratch)
		unlock()
		wh.Close()
		return nil, err
	}
	return &Warehouse{wh: wh, src: src, cfg: cfg, dsn: dsn, scratch: scratch, unlock: unlock}, nil
}

// Opener is Open over cfg and src in the shape of proof.Prover.OpenCommands;
// nil when cfg names no proof_warehouse, so that the prover says to set one.
func Opener(cfg *refill.Config, src refill.Warehouse) func(context.Context) (proof.CommandRunner, error) {
	if cfg.ProofWarehouse == "" {
		return nil
	}
	return func(ctx context.Context) (proof.CommandRunner, error) {
		w, err := Open(ctx, cfg, src)
		if err != nil {
			return nil, err
		}
		return w, nil
	}
}

// Name says where the builds run, for the evidence.
func (p *Warehouse) Name() string {
	return "proof_warehouse " + dsnpkg.Redact(p.dsn)
}

// Run runs d's job for partition with the runner a run uses (jobs.For),
// told to write to the proof warehouse and run in the scratch directory.
func (p *Warehouse) Run(ctx context.Context, d *refill.Dataset, partition string) error {
	deps := jobs.DepsOf(p.cfg)
	deps.WorkDir = p.scratch
	jr, err := jobs.For(d.Job.Kind, deps)
	if err != nil {
		return err
	}
	refill.Yield(p.wh) // a DuckDB file is the job's to open now
	_, err = jr.Build(ctx, nil, d, refill.JobRun{Partition: partition, Warehouse: p.dsn, Proof: true})
	return err
}

// Delete empties t's partition in the proof warehouse.
func (p *Warehouse) Delete(ctx context.Context, t refill.TableRef, partition string) error {
	return p.wh.Transact(ctx, func(tx refill.WarehouseTx) error {
		_, err := tx.DeletePartition(ctx, t, partition)
		return err
	})
}

// Digest checksums t's partition in the proof warehouse.
func (p *Warehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	return p.wh.Digest(ctx, t, partition)
}

// Spoil makes t's partition in the proof warehouse deliberately stale.
func (p *Warehouse) Spoil(ctx context.Context, t refill.TableRef, partition string) (what string, changed bool, err error) {
	err = p.wh.Transact(ctx, func(tx refill.WarehouseTx) error {
		var err error
		what, changed, err = tx.Spoil(ctx, t, partition)
		return err
	})
	return what, changed, err
}

// Seed copies the partition of each upstream of d that has a table from
// the warehouse into the proof warehouse (creating the table there when it
// is missing), replacing what the proof warehouse held of it: a job that
// ignores its inputs cannot agree with itself on an empty database.
func (p *Warehouse) Seed(ctx context.Context, d *refill.Dataset, partition string) (int64, error) {
	if p.src == nil {
		return 0, fmt.Errorf("no warehouse is open to copy the inputs of %s from", d.Name)
	}
	if p.src.Driver() != p.wh.Driver() {
		return 0, refill.BadInputf("proof_warehouse must use the same engine as the warehouse (%s) so the job's inputs can be copied there", p.src.Driver())
	}
	if d.Table != "" {
		if err := ensureTable(ctx, p.src, p.wh, d.Ref()); err != nil {
			return 0, err
		}
	}
	var total int64
	for _, up := range d.Upstream {
		ud := p.cfg.Datasets[up]
		if ud == nil || ud.Table == "" {
			continue
		}
		n, err := copyPartition(ctx, p.src, p.wh, ud.Ref(), partition)
		if err != nil {
			return total, fmt.Errorf("upstream %s: %w", up, err)
		}
		total += n
	}
	return total, nil
}

// Close removes the commands' working directory and closes the proof
// warehouse.
func (p *Warehouse) Close() error {
	os.RemoveAll(p.scratch)
	p.unlock()
	return p.wh.Close()
}
