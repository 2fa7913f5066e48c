//go:build duckdb

package duckdb_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/duckdb"
)

func TestZZScratch(t *testing.T) {
	file := os.Getenv("HX_FILE")
	if file == "" {
		t.Skip()
	}
	data, _ := os.ReadFile(file)
	ref := refill.TableRef{Table: "revenue_daily", Column: "day", Grain: refill.GrainDay}
	var w *duckdb.Warehouse
	fresh := func() {
		if w != nil {
			w.Close()
		}
		var err error
		w, err = duckdb.Open(filepath.Join(t.TempDir(), "warehouse.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			"CREATE TABLE revenue_daily (day DATE, region TEXT, amount NUMERIC, PRIMARY KEY (day, region))",
			"INSERT INTO revenue_daily VALUES ('2026-10-31', 'eu', 1), ('2026-11-01', 'eu', 2), ('2026-11-01', 'us', 3), ('2026-11-02', 'eu', 4)",
			"CREATE TABLE revenue_src (day DATE, region TEXT, amount NUMERIC)",
			"INSERT INTO revenue_src VALUES ('2026-11-01', 'eu', 20), ('2026-11-01', 'us', 30)",
			"CREATE TABLE billing (day DATE, account TEXT, amount NUMERIC)",
			"INSERT INTO billing VALUES ('2026-11-01', 'acme', 100), ('2026-11-02', 'acme', 200)",
		} {
			if _, err := w.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		err = w.Transact(t.Context(), func(tx refill.WarehouseTx) error {
			if _, err := tx.MarkPublished(t.Context(), "plan-1", "revenue", "2026-11-01"); err != nil {
				return err
			}
			return tx.Anchor(t.Context(), refill.AuditAnchor{Store: "state", Seq: 7, Hash: "h7"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fresh()
	dump := func(q string) {
		rows, err := w.DB().Query(q)
		if err != nil {
			fmt.Println("   raw err:", err)
			return
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			fmt.Println("   ", vals)
		}
		if err := rows.Err(); err != nil {
			fmt.Println("   raw err:", err)
		}
	}
	for _, block := range strings.Split(string(data), "\n----\n") {
		block = strings.TrimSpace(block)
		if block == "" {
			continue
		}
		mode, sqlText, _ := strings.Cut(block, "\n")
		fmt.Printf("=== %s: %s\n", mode, sqlText)
		ctx := t.Context()
		switch mode {
		case "fresh":
			fresh()
		case "raw":
			dump(sqlText)
		case "exec", "execr":
			f := w.Transact
			if mode == "execr" {
				f = w.Rehearse
			}
			err := f(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, ref, sqlText, "2026-11-01") })
			fmt.Println("   err:", err)
		case "query":
			err := w.Transact(ctx, func(tx refill.WarehouseTx) error {
				n, err := tx.ReplaceFromQuery(ctx, ref, sqlText, "2026-11-01")
				fmt.Println("   n:", n)
				return err
			})
			fmt.Println("   err:", err)
		case "count":
			c, err := w.QueryCounts(ctx, sqlText, []string{"2026-11-01", "2026-11-02"})
			fmt.Println("   counts:", c, "err:", err)
		}
	}
}
