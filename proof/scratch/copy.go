package scratch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// dber is a warehouse driver that exposes its database/sql handle.
type dber interface{ DB() *sql.DB }

// ensureTable creates t's table in dst with src's columns when dst lacks
// it: the job's own table in the proof warehouse, so a first proof needs no
// set-up there.
func ensureTable(ctx context.Context, src, dst refill.Warehouse, t refill.TableRef) error {
	if _, err := dst.Columns(ctx, t.Table); err == nil || !errors.Is(err, refill.ErrNoTable) {
		return err
	}
	cols, err := src.Columns(ctx, t.Table)
	if err != nil {
		return fmt.Errorf("table %s is in neither the warehouse nor proof_warehouse: %w", t.Table, err)
	}
	d, ok := dst.(dber)
	if !ok {
		return fmt.Errorf("the %s proof warehouse cannot create tables", dst.Driver())
	}
	var defs []string
	for _, c := range cols {
		defs = append(defs, sqltext.QuoteIdent(c.Name)+" "+c.Type)
	}
	if _, err := d.DB().ExecContext(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", quoteTable(src, t.Table), strings.Join(defs, ", "))); err != nil {
		return fmt.Errorf("creating %s in proof_warehouse: %w", t.Table, err)
	}
	return nil
}

// copyPartition copies one partition of t from src into dst, both of one
// engine: dst's table is created with src's columns if it is missing, its
// partition emptied, and src's rows inserted. It reads rows, which refill
// otherwise never does: it serves proofs only, one partition at a time.
//
// The partition is selected by the text form of the partition column
// (YYYY-MM-DD…, read in UTC), which every engine and column type refill
// partitions by renders the same way.
func copyPartition(ctx context.Context, src, dst refill.Warehouse, t refill.TableRef, partition string) (int64, error) {
	s, ok1 := src.(dber)
	d, ok2 := dst.(dber)
	tr := dst
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("the %s warehouse cannot copy partitions", src.Driver())
	}
	cols, err := src.Columns(ctx, t.Table)
	if err != nil {
		return 0, err
	}
	pg := src.Driver() == "postgres"
	dialect := warehouse.Dialect(src)
	var names, defs []string
	for _, c := range cols {
		names = append(names, sqltext.QuoteIdent(c.Name))
		defs = append(defs, sqltext.QuoteIdent(c.Name)+" "+c.Type)
	}
	pcol, ok := dialect.Column(cols, t.Column)
	if !ok {
		return 0, refill.BadInputf("table %s has no partition column %s", t.Table, t.Column)
	}
	prefix := partition
	textOf := "CAST(" + sqltext.QuoteIdent(pcol.Name) + " AS TEXT)"
	if t.Grain == refill.GrainHour {
		prefix = strings.Replace(partition, "T", " ", 1)
		textOf = "replace(" + textOf + ", 'T', ' ')"
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s LIKE %s", strings.Join(names, ", "), quoteTable(src, t.Table), textOf, dialect.Placeholder(1))
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if pg {
		if _, err := conn.ExecContext(ctx, "SET TIME ZONE 'UTC'"); err != nil {
			return 0, err
		}
	}
	rows, err := conn.QueryContext(ctx, q, prefix+"%")
	if err != nil {
		return 0, fmt.Errorf("reading %s %s: %w", t.Table, partition, err)
	}
	var data [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return 0, err
		}
		data = append(data, vals)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if _, err := d.DB().ExecContext(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", quoteTable(src, t.Table), strings.Join(defs, ", "))); err != nil {
		return 0, fmt.Errorf("creating %s in the proof warehouse: %w", t.Table, err)
	}
	var ph []string
	for i := range cols {
		ph = append(ph, dialect.Placeholder(i+1))
	}
	ins := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", quoteTable(src, t.Table), strings.Join(names, ", "), strings.Join(ph, ", "))
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		if _, err := tx.DeletePartition(ctx, t, partition); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	dtx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer dtx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, row := range data {
		if _, err := dtx.ExecContext(ctx, ins, row...); err != nil {
			return 0, fmt.Errorf("copying %s %s into the proof warehouse: %w", t.Table, partition, err)
		}
	}
	return int64(len(data)), dtx.Commit()
}

func quoteTable(w refill.Warehouse, name string) string {
	return warehouse.Dialect(w).QuoteName(name)
}
