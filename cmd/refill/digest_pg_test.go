package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/postgres"
)

// TestRollbackWithChecksumsFromBeforeVersion2: a PostgreSQL warehouse
// computes version 2 checksums, but a snapshot (and a run) recorded by a
// refill from before them holds version 1 ones. A rollback still compares
// like with like — the live rows and the snapshot table digested again the
// old way — so it restores what is this plan's to restore, and still
// refuses what someone else wrote since.
func TestRollbackWithChecksumsFromBeforeVersion2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		oldRun     bool   // the run, too, was recorded before version 2
		writeSince bool   // someone else wrote the partition after the run
		code       int    // of the rollback
		want       string // in its output
	}{
		{name: "snapshot before", code: 0},
		{name: "snapshot and run before", oldRun: true, code: 0},
		{name: "written since", oldRun: true, writeSince: true, code: 4, want: "it was written since this plan published it"},
		{name: "written since, run after", writeSince: true, code: 4, want: "it was written since this plan published it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whDSN, stateDSN := pgSchema(t), pgSchema(t)
			db, err := sql.Open("pgx", whDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.Exec(q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`CREATE TABLE orders (id int, order_date date, amount numeric)`)
			exec(`INSERT INTO orders SELECT g, date '2026-11-01' + (g % 2), g FROM generate_series(1, 50) g`)
			exec(`CREATE TABLE orders_daily (day date, orders bigint, amount numeric, at timestamptz)`)
			exec(`INSERT INTO orders_daily VALUES ('2026-11-01', 10, 1, '2026-11-01 10:00Z'), ('2026-11-02', 3, NULL, NULL)`)
			dir := t.TempDir()
			cfg := `version: 1
warehouse: "` + whDSN + `"
state: "` + stateDSN + `"
users:
  alice: {roles: [engineer]}
  bob: {roles: [engineer]}
  carol: {roles: [lead]}
datasets:
  orders:
    table: orders
    partition: {column: order_date}
  orders_daily:
    table: orders_daily
    partition: {column: day}
    upstream: [orders]
    job:
      query: |
        SELECT order_date AS day, count(*) AS orders, sum(amount) AS amount, NULL::timestamptz AS at
        FROM orders WHERE order_date = :partition::date GROUP BY order_date
`
			if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			id := decode[planJSON](t, step(t, dir, 0, "", "plan", "orders_daily", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
			step(t, dir, 0, "", "snapshot", id, "--as", "alice")

			w, err := postgres.Open(t.Context(), whDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			column := map[string]string{"orders": "order_date", "orders_daily": "day"}
			v1 := func(dataset, table, partition string) refill.Digest {
				t.Helper()
				d, err := w.DigestVersion(t.Context(), refill.TableRef{Table: table, Column: column[dataset], Grain: refill.GrainDay}, partition, refill.DigestV1)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			state := schemaOf(stateDSN)
			rows, err := db.Query(`SELECT dataset, partition, snapshot_table, checksum FROM `+state+`.snapshots WHERE plan_id = $1`, id)
			if err != nil {
				t.Fatal(err)
			}
			type part struct{ dataset, partition, table, checksum string }
			var parts []part
			for rows.Next() {
				var p part
				if err := rows.Scan(&p.dataset, &p.partition, &p.table, &p.checksum); err != nil {
					t.Fatal(err)
				}
				parts = append(parts, p)
			}
			if rows.Close(); len(parts) != 4 { // orders_daily's, and its source's
				t.Fatalf("snapshot parts: %v", parts)
			}
			for _, p := range parts {
				if d := (refill.Digest{Checksum: p.checksum}); d.Version() != 2 {
					t.Fatalf("the snapshot's checksum %s is not of version 2", p.checksum)
				}
				// As a refill before version 2 recorded it.
				exec(`UPDATE `+state+`.snapshots SET checksum = $1 WHERE plan_id = $2 AND dataset = $3 AND partition = $4`, v1(p.dataset, p.table, p.partition).Checksum, id, p.dataset, p.partition)
			}

			step(t, dir, 0, "", "approve", id, "--as", "bob")
			step(t, dir, 0, "", "apply", id, "--as", "alice")
			if tc.oldRun {
				for _, p := range parts {
					if p.dataset == "orders_daily" {
						exec(`UPDATE `+state+`.run_partitions SET checksum_before = $1, checksum_after = $2 WHERE plan_id = $3 AND dataset = $4 AND partition = $5`,
							v1(p.dataset, p.table, p.partition).Checksum, v1(p.dataset, "orders_daily", p.partition).Checksum, id, p.dataset, p.partition)
					}
				}
			}
			if tc.writeSince {
				exec(`UPDATE orders_daily SET amount = amount + 1 WHERE day = '2026-11-01'`)
			}
			var applied int
			if err := db.QueryRow(`SELECT count(*) FROM orders_daily WHERE orders = 25`).Scan(&applied); err != nil || applied != 2 {
				t.Fatalf("after the run, %d partitions hold the job's rows (%v), want 2", applied, err)
			}

			step(t, dir, tc.code, tc.want, "rollback", id, "--as", "carol")
			var restored int
			if err := db.QueryRow(`SELECT count(*) FROM orders_daily WHERE orders IN (10, 3)`).Scan(&restored); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 2, false: 0}[tc.code == 0]; restored != want {
				t.Errorf("%d partitions restored, want %d", restored, want)
			}
		})
	}
}
