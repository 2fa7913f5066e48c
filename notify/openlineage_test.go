package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/queue"
)

const olPath = "/ol/api/v1/lineage"

// olSchemas compiles OpenLineage's RunEvent schema and the facets refill
// sends from the shared fixtures, and refill's own facet from the
// repository, with formats asserted.
type olSchemas struct {
	event  *jsonschema.Schema
	facets map[string]*jsonschema.Schema // by facet key
}

func compileOL(t *testing.T) olSchemas {
	t.Helper()
	dir := fixtures.Dir(t, "openlineage")
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	add := func(path string) string {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			id = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return id
	}
	core := add(filepath.Join(dir, "OpenLineage.json"))
	s := olSchemas{facets: map[string]*jsonschema.Schema{}}
	var err error
	if s.event, err = c.Compile(core + "#/$defs/RunEvent"); err != nil {
		t.Fatal(err)
	}
	for key, file := range map[string]string{
		"parent": "ParentRunFacet", "nominalTime": "NominalTimeRunFacet", "errorMessage": "ErrorMessageRunFacet", "jobType": "JobTypeJobFacet",
	} {
		id := add(filepath.Join(dir, "facets", file+".json"))
		if s.facets[key], err = c.Compile(id + "#/$defs/" + file); err != nil {
			t.Fatal(err)
		}
	}
	own := add(filepath.Join("..", "docs", "openlineage", "RefillRunFacet.json"))
	if s.facets["refill"], err = c.Compile(own + "#/$defs/RefillRunFacet"); err != nil {
		t.Fatal(err)
	}
	return s
}

type olEvent struct {
	EventType string `json:"eventType"`
	Run       struct {
		RunID  string                     `json:"runId"`
		Facets map[string]json.RawMessage `json:"facets"`
	} `json:"run"`
	Job struct {
		Namespace string                     `json:"namespace"`
		Name      string                     `json:"name"`
		Facets    map[string]json.RawMessage `json:"facets"`
	} `json:"job"`
	Inputs  []struct{ Namespace, Name string } `json:"inputs"`
	Outputs []struct{ Namespace, Name string } `json:"outputs"`
}

// check validates one delivery against the schemas and decodes it.
func (s olSchemas) check(t *testing.T, r recorded) olEvent {
	t.Helper()
	if got := r.Header.Get("Authorization"); got != "Bearer an OpenLineage key" {
		t.Errorf("Authorization = %q", got)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.event.Validate(doc); err != nil {
		t.Errorf("not a valid RunEvent: %v\n%s", err, r.Body)
	}
	var ev olEvent
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		t.Fatal(err)
	}
	for key, raw := range mergeFacets(ev.Run.Facets, ev.Job.Facets) {
		sch := s.facets[key]
		if sch == nil {
			t.Errorf("facet %q has no schema to check it by", key)
			continue
		}
		fd, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(fd); err != nil {
			t.Errorf("facet %s: %v\n%s", key, err, raw)
		}
	}
	return ev
}

func mergeFacets(ms ...map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestOpenLineageRunEvents: a run is told to a lineage tool as START and
// COMPLETE of the plan's run, with a child run per dataset under it, every
// event valid by OpenLineage's schema and its facets by theirs; a notice
// job run again sends nothing twice; a failed run is told as FAIL, with
// the error.
func TestOpenLineageRunEvents(t *testing.T) {
	sch := compileOL(t)
	t.Run("complete", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{openLineage: true})
		e.run(t, e.p, e.n)
		ctx := context.Background()
		plan := e.plan(t)
		if _, err := e.p.Control.Approve(ctx, plan.ID, "bob", "counts look right"); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Control.Apply(ctx, plan.ID, "bob"); err != nil {
			t.Fatal(err)
		}
		got := e.slack.wait(t, olPath, 4)
		var evs []olEvent
		for _, r := range got {
			evs = append(evs, sch.check(t, r))
		}
		var order []string
		for _, ev := range evs {
			order = append(order, ev.EventType+" "+ev.Job.Name)
		}
		want := []string{"START backfill", "START backfill.orders_daily", "COMPLETE backfill.orders_daily", "COMPLETE backfill"}
		if !slices.Equal(order, want) {
			t.Fatalf("events %q, want %q", order, want)
		}
		parent, child := evs[0], evs[1]
		if evs[3].Run.RunID != parent.Run.RunID || evs[2].Run.RunID != child.Run.RunID || parent.Run.RunID == child.Run.RunID {
			t.Errorf("run IDs: parent %s/%s, child %s/%s", parent.Run.RunID, evs[3].Run.RunID, child.Run.RunID, evs[2].Run.RunID)
		}
		if parent.Job.Namespace != "acme-refill" {
			t.Errorf("job namespace %q", parent.Job.Namespace)
		}
		var facet struct {
			PlanID, Tier, Reason, RequestedBy string
			Approvers                         []string
			Partitions                        int
		}
		if err := json.Unmarshal(parent.Run.Facets["refill"], &facet); err != nil {
			t.Fatal(err)
		}
		if facet.PlanID != plan.ID || facet.Tier != "semi-auto" || facet.RequestedBy != "alice" || !slices.Equal(facet.Approvers, []string{"bob"}) ||
			facet.Partitions != 3 || facet.Reason != "late orders <!here>" {
			t.Errorf("refill facet %+v", facet)
		}
		var parentOf struct {
			Run struct{ RunID string } `json:"run"`
		}
		if err := json.Unmarshal(child.Run.Facets["parent"], &parentOf); err != nil || parentOf.Run.RunID != parent.Run.RunID {
			t.Errorf("the child's parent facet: %s (%v)", child.Run.Facets["parent"], err)
		}
		wh := "sqlite://" + filepath.Join(filepath.Dir(e.cfg), "warehouse.db")
		if len(child.Inputs) != 1 || child.Inputs[0].Name != "orders" || child.Inputs[0].Namespace != wh ||
			len(child.Outputs) != 1 || child.Outputs[0].Name != "orders_daily" {
			t.Errorf("the child reads %+v and writes %+v; want orders and orders_daily in %s", child.Inputs, child.Outputs, wh)
		}
		// Every notice job again: nothing is sent twice.
		rc := riverClient(t, e.p.Store)
		res, err := rc.JobList(ctx, river.NewJobListParams().Kinds(queue.NotifyArgs{}.Kind()).First(100))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			waitJob(t, rc, j.ID, 1)
			if _, err := rc.JobRetry(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			waitJob(t, rc, j.ID, 2)
		}
		if n := len(e.slack.requests(olPath)); n != 4 {
			t.Errorf("after every notice job ran twice: %d OpenLineage events, want the 4", n)
		}
	})
	t.Run("fail", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{openLineage: true, broken: true})
		e.run(t, e.p, e.n)
		ctx := context.Background()
		plan := e.plan(t)
		if _, err := e.p.Control.Approve(ctx, plan.ID, "bob", "try it"); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Control.Apply(ctx, plan.ID, "bob"); err == nil {
			t.Fatal("the broken job's run succeeded")
		}
		got := e.slack.wait(t, olPath, 4)
		var order []string
		var last olEvent
		for _, r := range got {
			last = sch.check(t, r)
			order = append(order, last.EventType+" "+last.Job.Name)
		}
		want := []string{"START backfill", "START backfill.orders_daily", "FAIL backfill.orders_daily", "FAIL backfill"}
		if !slices.Equal(order, want) {
			t.Fatalf("events %q, want %q", order, want)
		}
		var msg struct{ Message string }
		if err := json.Unmarshal(last.Run.Facets["errorMessage"], &msg); err != nil || !strings.Contains(msg.Message, "no_such_column") {
			t.Errorf("the parent's errorMessage facet: %s (%v)", last.Run.Facets["errorMessage"], err)
		}
		// Cancelling the failed plan ends nothing more: a run has one end.
		// And a plan cancelled before it ever ran tells nothing, without
		// an error for River to retry.
		if _, err := e.p.Control.Cancel(ctx, plan.ID, "alice", "giving up"); err != nil {
			t.Fatal(err)
		}
		never := e.plan(t)
		if _, err := e.p.Control.Cancel(ctx, never.ID, "alice", "not needed"); err != nil {
			t.Fatal(err)
		}
		rc := riverClient(t, e.p.Store)
		res, err := rc.JobList(ctx, river.NewJobListParams().Kinds(queue.NotifyArgs{}.Kind()).First(100))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			if got := waitJob(t, rc, j.ID, 1); len(got.Errors) > 0 {
				t.Errorf("notice job %d (%s) failed before it completed: %v", j.ID, j.EncodedArgs, got.Errors)
			}
		}
		if n := len(e.slack.requests(olPath)); n != 4 {
			t.Errorf("after the cancels: %d OpenLineage events, want the failed run's 4", n)
		}
	})
}
