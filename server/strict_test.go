package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestAPIStrictJSONAtEveryDepth: every JSON body the API reads refuses a
// key given twice at any depth, a key of refill's in another case (even in
// a DAG run's conf, which takes the DAG's own keys besides), and keys it
// does not define — 400, code 2, naming the key by its JSON pointer — and
// nothing is planned, decided or recorded.
func TestAPIStrictJSONAtEveryDepth(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	ctx := context.Background()
	_, made := e.call("alice", "POST", "/api/v1/plans", `{"targets":["sessions"],"from":"`+e.sc.Day(12)+`","to":"`+e.sc.Day(10)+`","reason":"late sessions"}`)
	id, _ := made["id"].(string)
	if id == "" {
		t.Fatalf("plan: %v", made)
	}
	conf := func(extra string) string {
		return `{"conf":{"start_date":"` + e.sc.Day(15) + `","end_date":"` + e.sc.Day(14) + `"` + extra + `},"note":"late"}`
	}
	for _, c := range []struct{ what, path, body, want string }{
		{"conf's start_date in capitals", "/api/v1/dags/sessions/dagRuns", conf(`,"START_DATE":"` + e.sc.Day(60) + `"`),
			`/conf/START_DATE: refill's key is "start_date": keys are matched exactly, case included`},
		{"conf's end_date twice", "/api/v1/dags/sessions/dagRuns", conf(`,"end_date":"` + e.sc.Day(1) + `"`), "/conf/end_date: given twice"},
		{"a key twice inside the DAG's own conf", "/api/v1/dags/sessions/dagRuns", conf(`,"params":{"owner":"a","owner":"b"}`), "/conf/params/owner: given twice"},
		{"a key twice in an Airflow field refill ignores", "/api/v1/dags/sessions/dagRuns", `{"conf":{"start_date":"` + e.sc.Day(9) + `","end_date":"` + e.sc.Day(8) + `"},"note":"x","state":{"a":1,"a":2}}`, "/state/a: given twice"},
		{"the note in another case", "/api/v1/dags/sessions/dagRuns", conf(`}, "NOTE":"rubber stamp", "x":{`), `/NOTE: refill's key is "note"`},
		{"a plan's reason twice", "/api/v1/plans", `{"targets":["sessions"],"from":"` + e.sc.Day(9) + `","to":"` + e.sc.Day(8) + `","reason":"reviewed","reason":"rubber stamp"}`, "/reason: given twice"},
		{"an approval's note in another case", "/api/v1/plans/" + id + "/approve", `{"note":"reviewed","Note":"rubber stamp"}`, `/Note: refill's key is "note"`},
		{"a forced rollback's flag in another case", "/api/v1/plans/" + id + "/rollback", `{"reason":"x","FORCE":true}`, `/FORCE: refill's key is "force"`},
		{"an unknown key", "/api/v1/plans/" + id + "/cancel", `{"reason":"x","as":"carol"}`, "/as: unknown key (known: force, note, reason)"},
		{"a value of the wrong kind", "/api/v1/plans", `{"targets":"sessions","from":"` + e.sc.Day(9) + `","to":"` + e.sc.Day(8) + `","reason":"x"}`, "/targets: want an array, not a string"},
		{"an acceptance's column twice", "/api/v1/datasets/events_raw/accept", `{"partition":"` + e.sc.Day(5) + `","check":"drift","column":"amount","column":"event_type","reason":"x"}`, "/column: given twice"},
		{"a proof's partition in another case", "/api/v1/datasets/sessions/prove", `{"Partition":"` + e.sc.Day(5) + `"}`, `/Partition: refill's key is "partition"`},
	} {
		before := e.auditLen()
		plans, _ := e.p.Store.Plans(ctx, refill.PlanFilter{})
		st, res := e.call("bob", "POST", c.path, c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if msg, _ := res["error"].(string); !strings.Contains(msg, "request body: "+c.want) {
			t.Errorf("%s: error %q, want %q", c.what, msg, c.want)
		}
		if n := e.auditLen(); n != before {
			t.Errorf("%s: the audit log grew from %d to %d entries", c.what, before, n)
		}
		if now, _ := e.p.Store.Plans(ctx, refill.PlanFilter{}); len(now) != len(plans) {
			t.Errorf("%s: %d plans became %d", c.what, len(plans), len(now))
		}
	}
	if s, err := e.p.Control.Load(ctx, id); err != nil || s.Plan.Status != refill.StatusPending || len(s.Approvals) != 0 {
		t.Errorf("the plan after refused bodies: %+v (%v)", s, err)
	}

	// The DAG's own conf keys stay its business: a trigger with them plans.
	st, res := e.call("alice", "POST", "/api/v1/dags/sessions/dagRuns", conf(`,"full_refresh":true,"params":{"owner":"data","Owner":"ops"}`))
	if st != http.StatusCreated {
		t.Errorf("a conf with the DAG's own keys: %d %v, want 201", st, res)
	}

	// An OpenLineage event: a key twice, or one of those refill reads in
	// another case, is refused by its pointer; nothing is recorded.
	edges := e.edgeCount()
	for _, c := range []struct{ what, body, want string }{
		{"an output twice", strings.Replace(olEvent("events_daily", "dash", "2026-11-30T12:00:00Z"), `"name":"dash"`, `"name":"dash","name":"events_daily"`, 1), "/outputs/0/name: given twice"},
		{"the job's name in another case", strings.Replace(olEvent("events_daily", "dash", "2026-11-30T12:00:00Z"), `"name":"metabase.sync"`, `"name":"metabase.sync","Name":"other"`, 1), `/job/Name: refill's key is "name"`},
	} {
		st, res := e.call("alice", "POST", "/api/v1/lineage", c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if msg, _ := res["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want %q", c.what, msg, c.want)
		}
	}
	if n := e.edgeCount(); n != edges {
		t.Errorf("refused events recorded edges: %d -> %d", edges, n)
	}
}
