package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs"
	"github.com/refill-dev/refill/warehouse"
)

// proofWarehouse is the scratch warehouse command jobs are proven against:
// the command is told to write there (REFILL_WAREHOUSE), and refill empties
// and checksums partitions there.
type proofWarehouse struct {
	wh      refill.Warehouse
	src     refill.Warehouse // the warehouse the job's inputs are copied from
	cfg     *refill.Config
	cmd     jobs.Command
	scratch string // the commands' working directory, removed on Close
}

func openProofWarehouse(ctx context.Context, cfg *refill.Config, src refill.Warehouse) (*proofWarehouse, error) {
	wh, err := warehouse.Open(ctx, cfg.ProofWarehouse, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("proof_warehouse: %w", err)
	}
	dsn := cfg.ProofWarehouse
	if path, ok := warehouse.SQLitePath(dsn, cfg.Dir); ok {
		dsn = "sqlite:" + path
	}
	scratch, err := os.MkdirTemp("", "refill-proof-")
	if err != nil {
		wh.Close()
		return nil, err
	}
	return &proofWarehouse{wh: wh, src: src, cfg: cfg, scratch: scratch, cmd: jobs.Command{Dir: cfg.Dir, WorkDir: scratch, Warehouse: dsn, Hidden: []string{cfg.Audit.KeyEnv}}}, nil
}

func (p *proofWarehouse) Name() string {
	return "proof_warehouse " + warehouse.RedactDSN(p.cmd.Warehouse)
}

func (p *proofWarehouse) Run(ctx context.Context, d *refill.Dataset, partition string) error {
	_, err := p.cmd.Run(ctx, d, partition)
	return err
}

func (p *proofWarehouse) Delete(ctx context.Context, t refill.TableRef, partition string) error {
	tr, ok := p.wh.(refill.Transactor)
	if !ok {
		return fmt.Errorf("the %s proof warehouse cannot write", p.wh.Driver())
	}
	return tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		_, err := tx.DeletePartition(ctx, t, partition)
		return err
	})
}

func (p *proofWarehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	r, ok := p.wh.(refill.Rehearser)
	if !ok {
		return refill.Digest{}, fmt.Errorf("the %s proof warehouse cannot checksum", p.wh.Driver())
	}
	return r.Digest(ctx, t, partition)
}

func (p *proofWarehouse) Spoil(ctx context.Context, t refill.TableRef, partition string) (what string, changed bool, err error) {
	tr, ok := p.wh.(refill.Transactor)
	if !ok {
		return "", false, fmt.Errorf("the %s proof warehouse cannot write", p.wh.Driver())
	}
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
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
func (p *proofWarehouse) Seed(ctx context.Context, d *refill.Dataset, partition string) (int64, error) {
	if p.src == nil || p.src.Driver() != p.wh.Driver() {
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

func (p *proofWarehouse) Close() error {
	os.RemoveAll(p.scratch)
	return p.wh.Close()
}
