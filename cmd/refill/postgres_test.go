package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestPostgresEndToEnd runs plan, show and plans through the binary with a
// PostgreSQL warehouse and a PostgreSQL state store.
func TestPostgresEndToEnd(t *testing.T) {
	t.Parallel()
	whDSN, stateDSN := pgSchema(t), pgSchema(t)
	db, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE orders (id int, order_date date, amount numeric)`,
		`INSERT INTO orders SELECT g, date '2026-11-01' + (g % 5), g FROM generate_series(1, 50) g`,
		`CREATE TABLE orders_daily (day date, orders bigint, amount numeric)`,
		`INSERT INTO orders_daily VALUES ('2026-11-01', 10, 1), ('2026-11-02', 3, 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	cfg := `version: 1
warehouse: "` + whDSN + `"
state: "` + stateDSN + `"
users:
  alice: {roles: [engineer]}
datasets:
  orders:
    table: orders
    partition: {column: order_date}
  orders_daily:
    table: orders_daily
    partition: {column: day}
    upstream: [orders]
    tags: [aggregate]
    job:
      query: |
        SELECT order_date AS day, count(*) AS orders, sum(amount) AS amount
        FROM orders WHERE order_date = :partition::date GROUP BY order_date
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, []string{"REFILL_USER=alice"}, "plan", "orders", "--from", "2026-11-01", "--to", "2026-11-03", "--reason", "repair", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: exit %d: %s", r.code, r.stderr)
	}
	p := decode[planJSON](t, r.stdout)
	if p.Tier != "semi-auto" || len(p.Steps) != 1 {
		t.Fatalf("plan = %+v", p)
	}
	var got []string
	for _, pp := range p.Steps[0].Partitions {
		got = append(got, pp.Partition+":"+rowsOf(pp.CurrentRows)+"->"+rowsOf(pp.ExpectedRows))
	}
	// orders_daily holds 10 and 3 rows; the query yields one row a day.
	if s := strings.Join(got, " "); s != "2026-11-01:1->1 2026-11-02:1->1 2026-11-03:0->1" {
		t.Errorf("partitions = %s", s)
	}
	s := run(t, dir, nil, "show", p.ID, "-o", "json")
	if s.code != 0 || decode[planJSON](t, s.stdout).Hash != p.Hash {
		t.Errorf("show: exit %d %s", s.code, s.stderr)
	}
	var stored int
	if err := db.QueryRow(`SELECT count(*) FROM ` + schemaOf(stateDSN) + `.plans`).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("plans in the PostgreSQL state store: %d (%v), want 1", stored, err)
	}
}

func schemaOf(dsn string) string {
	i := strings.Index(dsn, "search_path=")
	s := dsn[i+len("search_path="):]
	if j := strings.IndexAny(s, "&"); j >= 0 {
		s = s[:j]
	}
	return s
}

func rowsOf(n *int64) string {
	if n == nil {
		return "?"
	}
	return strconv.FormatInt(*n, 10)
}
