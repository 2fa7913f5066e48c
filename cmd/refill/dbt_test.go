package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeDBT is a dbt as far as refill can tell: `--version` prints what dbt
// 1.9 prints; a run records its argv and environment and builds the
// model's rows for exactly [--event-time-start, --event-time-end) into the
// database its target names (proof → the proof warehouse), as a
// microbatch model does. dbt itself cannot be installed on these machines.
const fakeDBT = `#!/usr/bin/env python3
import json, os, sqlite3, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("Core:\n  - installed: 1.9.1\n  - latest:    1.9.1 - Up to date!\n\nPlugins:\n  - sqlite: 1.9.0")
    sys.exit(0)
with open(%q, "a") as log:
    log.write(json.dumps({"argv": args, "env": {k: v for k, v in os.environ.items() if k.startswith("REFILL_") or k.startswith("DBT_")}}) + "\n")
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
target = opt("--target", "dev")
db = sqlite3.connect(%q if target == "proof" else %q)
start, end = opt("--event-time-start"), opt("--event-time-end")
if start is None or end is None:
    sys.exit("no --event-time-start/--event-time-end")
db.execute("DELETE FROM events_daily WHERE day >= substr(?, 1, 10) AND day < substr(?, 1, 10)", (start, end))
db.execute("INSERT INTO events_daily SELECT day, count(*), sum(amount) FROM events_raw WHERE day >= substr(?, 1, 10) AND day < substr(?, 1, 10) GROUP BY day", (start, end))
db.commit()
`

// A microbatch model imported from a dbt manifest is an ordinary job:
// proven on the proof warehouse through the dbt target datasets_from
// names, planned auto for three days, and run as one dbt run per
// partition for exactly its bounds (dbt 1.9's --event-time-start/end),
// never with --target proof outside a proof.
func TestDBTMicrobatchModel(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 runs the fake dbt")
	}
	dir := t.TempDir()
	wh, proofDB, log := filepath.Join(dir, "wh.db"), filepath.Join(dir, "proof.db"), filepath.Join(dir, "dbt.log")
	for _, path := range []string{wh, proofDB} {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{
			"CREATE TABLE events_raw (day TEXT, id INTEGER, amount REAL)",
			"CREATE TABLE events_daily (day TEXT, events INTEGER, amount REAL)",
			"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 40) INSERT INTO events_raw SELECT date('2026-11-20', '+' || (i % 8) || ' days'), i, i * 1.5 FROM g",
			"INSERT INTO events_daily SELECT day, count(*), 0 FROM events_raw GROUP BY day",
		} {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	files := map[string]string{
		"bin/dbt":                fmt.Sprintf(fakeDBT, log, proofDB, wh),
		"shop/dbt_project.yml":   "name: shop\nprofile: shop\n",
		"shop/models/events.sql": "{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='day', batch_size='day') }}\nselect day, count(*) as events, sum(amount) as amount from {{ source('raw', 'events_raw') }} group by day\n",
		"shop/target/manifest.json": `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "dbt_version": "1.9.1", "project_name": "shop", "adapter_type": "sqlite"},
 "nodes": {"model.shop.events_daily": {"resource_type": "model", "name": "events_daily", "package_name": "shop", "schema": "main", "alias": "events_daily",
   "config": {"materialized": "incremental", "incremental_strategy": "microbatch", "event_time": "day", "batch_size": "day"},
   "checksum": {"name": "sha256", "checksum": "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"},
   "depends_on": {"nodes": ["source.shop.raw.events_raw"]}}},
 "sources": {"source.shop.raw.events_raw": {"resource_type": "source", "name": "events_raw", "source_name": "raw", "package_name": "shop", "schema": "main", "identifier": "events_raw",
   "config": {"event_time": "day"}, "meta": {}, "depends_on": {"nodes": []}}}}`,
		"refill.yaml": fmt.Sprintf(`version: 1
warehouse: sqlite:wh.db
proof_warehouse: sqlite:proof.db
run: {path: [%s, /usr/bin, /bin]}
datasets_from: {dbt_manifest: shop/target/manifest.json, proof_target: proof}
`, filepath.Join(dir, "bin")),
	}
	for path, body := range files {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(path, "bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	calls := func() [][]string {
		f, err := os.Open(log)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out [][]string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var c struct{ Argv []string }
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c.Argv)
		}
		return out
	}

	step(t, dir, 0, "events_daily", "lineage", "--format", "text")
	for _, day := range []string{"2026-11-21"} {
		step(t, dir, 0, "", "prove", "events_daily", "--partition", day, "--as", "alice")
	}
	for _, c := range calls() {
		if !slices.Equal(c[:3], []string{"run", "--select", "events_daily"}) || !slices.Contains(c, "--event-time-start") || c[len(c)-2] != "--target" || c[len(c)-1] != "proof" {
			t.Errorf("a proof ran dbt %q; want dbt run of the model for its bounds, with --target proof", c)
		}
	}
	proofCalls := len(calls())
	if proofCalls < 2 {
		t.Fatalf("the proof ran dbt %d times", proofCalls)
	}

	r := step(t, dir, 0, "", "plan", "events_daily", "--from", "2026-11-21", "--to", "2026-11-23", "--reason", "late events", "--as", "alice", "-o", "json")
	p := decode[planJSON](t, r.stdout)
	if p.Tier != "auto" {
		t.Fatalf("tier %s, want auto: %q", p.Tier, p.Reasons)
	}
	text := step(t, dir, 0, "", "show", p.ID).stdout
	if !strings.Contains(text, "runs dbt run --select events_daily --event-time-start {{start}} --event-time-end {{end}}") {
		t.Errorf("the plan does not say what dbt is asked to do:\n%s", text)
	}
	step(t, dir, 0, "", "apply", p.ID, "--as", "alice")
	runs := calls()[proofCalls:]
	var bounds []string
	for _, c := range runs {
		if slices.Contains(c, "--target") {
			t.Errorf("a real run passed --target: %q", c)
		}
		i := slices.Index(c, "--event-time-start")
		if i < 0 || i+3 >= len(c) || c[i+2] != "--event-time-end" {
			t.Fatalf("a run ran dbt %q", c)
		}
		bounds = append(bounds, c[i+1]+" "+c[i+3])
	}
	slices.Sort(bounds)
	want := []string{"2026-11-21T00:00:00 2026-11-22T00:00:00", "2026-11-22T00:00:00 2026-11-23T00:00:00", "2026-11-23T00:00:00 2026-11-24T00:00:00"}
	if !slices.Equal(bounds, want) {
		t.Errorf("dbt ran for %q, want one run per partition, its bounds exactly: %q", bounds, want)
	}
	db, err := sql.Open("sqlite", wh)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rebuilt int
	if err := db.QueryRow("SELECT count(*) FROM events_daily WHERE amount > 0").Scan(&rebuilt); err != nil || rebuilt != 3 {
		t.Errorf("%d partitions rebuilt in the warehouse (%v), want 3", rebuilt, err)
	}
}
