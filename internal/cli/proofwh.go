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
	cmd     jobs.Command
	scratch string // the commands' working directory, removed on Close
}

func openProofWarehouse(ctx context.Context, cfg *refill.Config) (*proofWarehouse, error) {
	wh, err := warehouse.Open(ctx, cfg.ProofWarehouse, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("proof_warehouse: %w", err)
	}
	dsn := cfg.ProofWarehouse
	if path := warehouse.SQLitePath(dsn, cfg.Dir); path != "" {
		dsn = "sqlite:" + path
	}
	scratch, err := os.MkdirTemp("", "refill-proof-")
	if err != nil {
		wh.Close()
		return nil, err
	}
	return &proofWarehouse{wh: wh, scratch: scratch, cmd: jobs.Command{Dir: cfg.Dir, WorkDir: scratch, Warehouse: dsn}}, nil
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

func (p *proofWarehouse) Close() error {
	os.RemoveAll(p.scratch)
	return p.wh.Close()
}
