package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/refill-dev/refill/store"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/server"
)

// olEvents are the OpenLineage fixtures as producers post them: the
// client examples as they are, and the dbt integration's sequences with
// their placeholders filled and producer and schemaURL added (SOURCES.md).
func olEvents(t *testing.T) map[string]string {
	t.Helper()
	dir := fixtures.Dir(t, "openlineage")
	out := map[string]string{}
	for _, name := range []string{"client_python_example_full_event.json", "client_python_serde_example_run_event.json", "example_full_event.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	for _, name := range []string{"dbt_bigquery_successful_run_ol_events.template.json", "dbt_postgres_failed_run_ol_events.template.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		filled := strings.ReplaceAll(string(b), `"{{ any(result) }}"`, `"7d3c9a51-2f0e-4b8a-9c61-0e5d2b7f4a10"`)
		var events []map[string]any
		if err := json.Unmarshal([]byte(filled), &events); err != nil {
			t.Fatal(err)
		}
		for i, ev := range events {
			ev["producer"] = "https://github.com/OpenLineage/OpenLineage/tree/1.26.0/integration/dbt"
			ev["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
			b, _ := json.Marshal(ev)
			out[fmt.Sprintf("%s[%d]", name, i)] = string(b)
		}
	}
	return out
}

// olEvent is a COMPLETE event of job metabase.sync reading in and
// writing out.
func olEvent(in, out, at string) string {
	return `{"eventType":"COMPLETE","eventTime":"` + at + `","producer":"https://github.com/metabase/metabase","schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
		"run":{"runId":"0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f6"},"job":{"namespace":"metabase","name":"metabase.sync"},
		"inputs":[{"namespace":"sqlite://warehouse.db","name":"` + in + `"}],"outputs":[{"namespace":"metabase://bi","name":"` + out + `"}]}`
}

func (e *apiEnv) edgeCount() int {
	e.t.Helper()
	edges, err := e.p.Store.LineageEdges(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return len(edges)
}

// TestAPILineageEvents: every fixture is accepted and its edges recorded
// once, however often it is posted; invalid events are refused with the
// field that is wrong and record nothing; a bearer token is required.
func TestAPILineageEvents(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if engine == "postgres" {
				dsn = pgtest.Schema(t)
			}
			e := apiServe(t, dsn)
			events := olEvents(t)
			total := 0
			for name, body := range events {
				st, res := e.call("alice", "POST", "/api/v1/lineage", body)
				if st != http.StatusCreated {
					t.Fatalf("%s: HTTP %d %v", name, st, res)
				}
				total += int(res["new_edges"].(float64))
			}
			if total == 0 || e.edgeCount() != total {
				t.Fatalf("%d new edges reported, %d recorded", total, e.edgeCount())
			}
			for name, body := range events {
				if st, res := e.call("bob", "POST", "/api/v1/lineage", body); st != http.StatusCreated || res["new_edges"].(float64) != 0 {
					t.Errorf("%s again: HTTP %d %v", name, st, res)
				}
			}
			if n := e.edgeCount(); n != total {
				t.Errorf("repeats changed the edges: %d -> %d", total, n)
			}

			// The answer says what refill made of the datasets.
			st, res := e.call("alice", "POST", "/api/v1/lineage", olEvent("main.sessions", "finance_dashboard", "2026-11-29T06:00:00Z"))
			in := res["inputs"].([]any)[0].(map[string]any)
			if st != http.StatusCreated || res["edges"].(float64) != 1 || fmt.Sprint(in["datasets"]) != "[sessions]" {
				t.Errorf("answer: HTTP %d %v", st, res)
			}
			total++
			// Who reported new edges is audited; a repeat is not.
			evs, err := e.p.Store.Audit(context.Background(), store.AuditFilter{Kind: refill.EventLineage})
			if err != nil || len(evs) == 0 || evs[len(evs)-1].Actor != "alice" || !strings.Contains(string(evs[len(evs)-1].Detail), "finance_dashboard") {
				t.Errorf("lineage audit: %d entries (%v)", len(evs), err)
			}

			good := olEvent("main.sessions", "other_dashboard", "2026-11-29T06:00:00Z")
			for _, c := range []struct{ what, body, want string }{
				{"missing runId", strings.Replace(good, `"runId":"0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f6"`, `"facets":{}`, 1), "/run/runId: missing"},
				{"bad uuid", strings.Replace(good, "0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f6", "run-42", 1), "/run/runId: not a uuid"},
				{"bad eventTime", strings.Replace(good, "2026-11-29T06:00:00Z", "2026-11-31T06:00:00Z", 1), "/eventTime: not a date-time"},
				{"eventType not in the enum", strings.Replace(good, `"COMPLETE"`, `"SUCCESS"`, 1), "/eventType: \"SUCCESS\" is not one of"},
				{"inputs not an array", strings.Replace(strings.Replace(good, `"inputs":[`, `"inputs":`, 1), `}],"outputs"`, `},"outputs"`, 1), "/inputs: want an array"},
				{"truncated JSON", good[:len(good)-20], "not JSON"},
				{"oversized body", `{"eventTime":"` + strings.Repeat("x", server.MaxBody) + `"}`, fmt.Sprintf("larger than %d bytes", server.MaxBody)},
				{"an array of events", "[" + good + "]", "not a RunEvent"},
				{"an event from the future", strings.Replace(good, "2026-11-29T06:00:00Z", "9999-12-31T00:00:00Z", 1), "more than a day ahead"},
			} {
				st, res := e.call("alice", "POST", "/api/v1/lineage", c.body)
				wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
				if msg, _ := res["error"].(string); !strings.Contains(msg, c.want) {
					t.Errorf("%s: %q, want it to say %q", c.what, msg, c.want)
				}
			}
			st, raw := e.raw("alice", "POST", "/api/v1/lineage", "text/plain", strings.NewReader(good))
			if st != http.StatusBadRequest || !strings.Contains(string(raw), "Content-Type") {
				t.Errorf("text/plain: HTTP %d %s", st, raw)
			}
			st, res = e.call("", "POST", "/api/v1/lineage", good)
			wantError(t, "no token", st, res, http.StatusUnauthorized, refill.ExitNotPermitted)
			if n := e.edgeCount(); n != total {
				t.Errorf("refused events recorded edges: %d -> %d", total, n)
			}
		})
	}
}

// TestAPIPlanNamesConsumersOutsideRefill: once a BI tool reports reading
// sessions into a dashboard refill does not manage, a plan over sessions
// that was auto names the dashboard as not rebuilt and needs a person.
func TestAPIPlanNamesConsumersOutsideRefill(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if engine == "postgres" {
				dsn = pgtest.Schema(t)
			}
			e := apiServe(t, dsn)
			if st, res := e.call("alice", "POST", "/api/v1/datasets/sessions/prove", `{"partition":"`+e.sc.Day(2)+`"}`); st != http.StatusOK {
				t.Fatalf("prove: HTTP %d %v", st, res)
			}
			body := `{"targets":["sessions"],"from":"` + e.sc.Day(3) + `","to":"` + e.sc.Day(1) + `","reason":"late events"}`
			st, plan := e.call("alice", "POST", "/api/v1/plans", body)
			if st != http.StatusCreated || plan["tier"] != "auto" || plan["consumers"] != nil {
				t.Fatalf("before lineage: HTTP %d tier %v consumers %v reasons %v", st, plan["tier"], plan["consumers"], plan["reasons"])
			}
			if st, res := e.call("bob", "POST", "/api/v1/lineage", olEvent("warehouse.main.sessions", "analytics.finance_dashboard", "2026-11-30T06:15:00Z")); st != http.StatusCreated {
				t.Fatalf("lineage: HTTP %d %v", st, res)
			}
			st, plan = e.call("alice", "POST", "/api/v1/plans", body)
			if st != http.StatusCreated {
				t.Fatalf("plan: HTTP %d %v", st, plan)
			}
			consumers, _ := plan["consumers"].([]any)
			if plan["tier"] != "semi-auto" || plan["status"] != "pending" || len(consumers) != 1 {
				t.Fatalf("after lineage: tier %v status %v consumers %v reasons %v", plan["tier"], plan["status"], plan["consumers"], plan["reasons"])
			}
			c := consumers[0].(map[string]any)
			if c["dataset"] != "analytics.finance_dashboard" || c["reads"] != "sessions" || c["job"] != "metabase.sync" || c["last_seen"] != "2026-11-30T06:15:00Z" {
				t.Errorf("consumer %v", c)
			}
			want := "sessions is read by analytics.finance_dashboard (job metabase.sync, seen 2026-11-30), a consumer outside refill: not rebuilt"
			if fmt.Sprint(plan["reasons"]) != "["+want+"]" {
				t.Errorf("reasons %v, want [%s]", plan["reasons"], want)
			}
			if steps := plan["steps"].([]any); len(steps) != 1 {
				t.Errorf("steps %v", steps)
			}
			// Stored and loaded as sealed.
			st, got := e.call("carol", "GET", "/api/v1/plans/"+plan["id"].(string), "")
			if st != http.StatusOK || fmt.Sprint(got["consumers"]) != fmt.Sprint(plan["consumers"]) || got["hash"] != plan["hash"] {
				t.Errorf("loaded: HTTP %d %v", st, got)
			}
		})
	}
}
