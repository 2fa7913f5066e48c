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
// tests): triggering a DAG run, 409 for a run id that exists, and polling
// it, which succeeds on the second poll unless the DAG is "broken".
type fakeAirflow struct {
	mu      sync.Mutex
	runs    map[string]map[string]any
	created map[string]int
	polls   map[string]int
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
		if f.polls[parts[2]] >= 2 {
			run["state"] = "success"
			if dag == "broken" {
				run["state"] = "failed"
			}
		}
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestAirflowJobs(t *testing.T) {
	fake := &fakeAirflow{runs: map[string]map[string]any{}, created: map[string]int{}, polls: map[string]int{}}
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
	r := &Runner{Config: cfg, Warehouse: w.WH, Store: st, Control: c, Backoff: 10 * time.Millisecond,
		Gate: &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st}}
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
	if err := r.Apply(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"2026-11-01", "2026-11-02"} {
		runID := "refill__" + id + "__export__" + part
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

	// A DAG run that ends failed fails the partition at once, and a resume
	// finds the same run (409) rather than starting a second one.
	cfg.Datasets["export"].Job = job("broken")
	id = plan()
	err = r.Apply(ctx, id, "alice")
	if err == nil || !strings.Contains(err.Error(), "failed after its last attempt") {
		t.Fatalf("apply with a failing DAG: %v", err)
	}
	if err := r.Apply(ctx, id, "alice"); err == nil {
		t.Fatal("a resume passed although the DAG run had failed")
	}
	for _, part := range []string{"2026-11-01", "2026-11-02"} {
		if n := fake.created["refill__"+id+"__export__"+part]; n != 1 {
			t.Errorf("failed DAG run for %s created %d times, want once", part, n)
		}
	}
	if got, _ := st.Plan(ctx, id); got.Status != refill.StatusFailed {
		t.Errorf("status %s, want failed", got.Status)
	}
}
