package run

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
)

// fakeAirflow is the part of Airflow 2's REST API a run uses (the request
// and response bodies are checked against the spec in jobs/airflow's
// tests): triggering a DAG run, 409 for a run id that exists, polling it,
// which succeeds on the second poll unless the DAG is broken, and marking
// it failed.
type fakeAirflow struct {
	mu      sync.Mutex
	runs    map[string]map[string]any
	created map[string]int
	polls   map[string]int
	broken  bool
	patched map[string]string // run id -> state set by PATCH
}

func (f *fakeAirflow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, p, ok := r.BasicAuth(); !ok || u != "refill" || p != "s3cret" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/dags/"), "/")
	dag := parts[0]
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && len(parts) == 2:
		var body struct {
			DagRunID string            `json:"dag_run_id"`
			Conf     map[string]string `json:"conf"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if _, ok := f.runs[body.DagRunID]; ok {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"title": "Conflict", "status": 409, "type": "about:blank", "detail": "exists"})
			return
		}
		run := map[string]any{"dag_id": dag, "dag_run_id": body.DagRunID, "state": "queued", "conf": body.Conf}
		f.runs[body.DagRunID] = run
		f.created[body.DagRunID]++
		json.NewEncoder(w).Encode(run)
	case r.Method == http.MethodGet && len(parts) == 3:
		run, ok := f.runs[parts[2]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.polls[parts[2]]++
		if f.polls[parts[2]] >= 2 && run["state"] == "queued" {
			run["state"] = "success"
			if f.broken {
				run["state"] = "failed"
			}
		}
		json.NewEncoder(w).Encode(run)
	case r.Method == http.MethodPatch && len(parts) == 3:
		run, ok := f.runs[parts[2]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body struct {
			State string `json:"state"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		run["state"] = body.State
		f.patched[parts[2]] = body.State
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestAirflowJobs(t *testing.T) {
	fake := &fakeAirflow{runs: map[string]map[string]any{}, created: map[string]int{}, polls: map[string]int{}, patched: map[string]string{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("AF_USER", "refill")
	t.Setenv("AF_PASS", "s3cret")
	airflowClient.PollInterval = 5 * time.Millisecond

	w := whtest.Open(t, "sqlite")
	w.Exec(t, "CREATE TABLE src (day TEXT)", "INSERT INTO src VALUES ('2026-11-01'), ('2026-11-02')")
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	job := func(dag string) *refill.Job {
		return &refill.Job{Kind: refill.JobAirflow, Airflow: &refill.AirflowJob{URL: srv.URL, DagID: dag, API: "v1", UsernameEnv: "AF_USER", PasswordEnv: "AF_PASS"}}
	}
	cfg := &refill.Config{Policy: refill.DefaultPolicy(), Run: refill.RunConfig{MaxActive: 2, MaxActiveTotal: 4, Attempts: 3},
		Datasets: map[string]*refill.Dataset{
			"src":    {Name: "src", Table: "src", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}},
			"export": {Name: "export", Upstream: []string{"src"}, Partition: refill.PartitionSpec{Grain: refill.GrainDay}, Job: job("export")},
		}}
	p, err := planner.New(cfg, w.WH, st)
	if err != nil {
		t.Fatal(err)
	}
	c := &control.Control{Config: cfg, Store: st, Warehouse: w.WH}
	r := &Runner{Config: cfg, Warehouse: w.WH, Store: st, Backoff: 10 * time.Millisecond,
		Gate: &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st}}
	c.Executor = r
	ctx := context.Background()
	plan := func() string {
		pl, err := p.Plan(ctx, planner.Request{Targets: []string{"export"}, From: "2026-11-01", To: "2026-11-02", Reason: "t", Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Approve(ctx, pl.ID, "bob", ""); err != nil {
			t.Fatal(err)
		}
		return pl.ID
	}

	id := plan()
	if err := c.Apply(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"2026-11-01", "2026-11-02"} {
		runID := "refill__" + id + "__export__" + part + "__r1"
		if fake.created[runID] != 1 {
			t.Errorf("DAG run %s created %d times, want once", runID, fake.created[runID])
		}
		conf := fake.runs[runID]["conf"].(map[string]string)
		if conf["start_date"] != part+"T00:00:00Z" || !strings.HasSuffix(conf["end_date"], "T00:00:00Z") {
			t.Errorf("conf of %s = %v", runID, conf)
		}
	}
	pubs, _ := st.Published(ctx, id)
	if len(pubs) != 2 || !strings.Contains(pubs[0].Output, "success") {
		t.Errorf("published = %+v", pubs)
	}

	// A DAG run that ends failed fails the partition at once (no retry
	// can mend it), and the log says so after the one attempt there was.
	cfg.Datasets["export"].Job = job("export2")
	fake.broken = true
	var log strings.Builder
	r.Log = &syncWriter{w: &log}
	id = plan()
	err = c.Apply(ctx, id, "alice")
	if err == nil || !strings.Contains(err.Error(), "failed after its last attempt") {
		t.Fatalf("apply with a failing DAG: %v", err)
	}
	if got, _ := st.Plan(ctx, id); got.Status != refill.StatusFailed {
		t.Errorf("status %s, want failed", got.Status)
	}
	if !strings.Contains(log.String(), "attempt 1 of 3 failed, and retrying cannot mend it") || strings.Contains(log.String(), "attempt 3 of 3") {
		t.Errorf("the log miscounts attempts:\n%s", log.String())
	}
	// Once the DAG is mended, applying again resumes: a fresh DAG run per
	// partition (its id carries the run), the old one marked failed.
	fake.broken = false
	if err := c.Apply(ctx, id, "alice"); err != nil {
		t.Fatalf("resume after the DAG was mended: %v", err)
	}
	for _, part := range []string{"2026-11-01", "2026-11-02"} {
		old, fresh := "refill__"+id+"__export__"+part+"__r1", "refill__"+id+"__export__"+part+"__r2"
		if fake.created[old] != 1 || fake.created[fresh] != 1 {
			t.Errorf("%s: DAG runs created r1 %d, r2 %d; want one each", part, fake.created[old], fake.created[fresh])
		}
		// The abandoned run had already ended failed, so refill left it as
		// it was rather than PATCH it (which needs edit rights).
		if fake.runs[old]["state"] != "failed" || fake.patched[old] != "" {
			t.Errorf("%s: the abandoned run is %v (patched %q)", part, fake.runs[old]["state"], fake.patched[old])
		}
	}
	if got, _ := st.Plan(ctx, id); got.Status != refill.StatusApplied {
		t.Errorf("status %s, want applied", got.Status)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
