package lineage

import (
	"sync"
	"testing"

	"github.com/refill-dev/refill"
)

// TestOfBuildsOncePerConfig: every caller of one loaded config shares one
// graph, built once even when asked for at once; another config gets its
// own, and a config whose lineage is broken says so to every caller.
func TestOfBuildsOncePerConfig(t *testing.T) {
	cfg := &refill.Config{Datasets: map[string]*refill.Dataset{
		"src": {Name: "src"},
		"agg": {Name: "agg", Upstream: []string{"src"}},
	}}
	graphs := make([]*Graph, 8)
	var wg sync.WaitGroup
	for i := range graphs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Of(cfg)
			if err != nil {
				t.Error(err)
			}
			graphs[i] = g
		}()
	}
	wg.Wait()
	for _, g := range graphs[1:] {
		if g != graphs[0] {
			t.Fatal("two callers of one config got two graphs")
		}
	}
	if d := graphs[0].downstream["src"]; len(d) != 1 || d[0] != "agg" {
		t.Errorf("downstream of src = %v", d)
	}
	other := &refill.Config{Datasets: map[string]*refill.Dataset{"src": {Name: "src"}}}
	if g, err := Of(other); err != nil || g == graphs[0] || len(g.downstream["src"]) != 0 {
		t.Errorf("another config's graph = %v, %v", g, err)
	}
	broken := &refill.Config{Datasets: map[string]*refill.Dataset{"a": {Name: "a", Upstream: []string{"nowhere"}}}}
	for range 2 {
		if _, err := Of(broken); err == nil {
			t.Error("a config with an unknown upstream gave a graph")
		}
	}
}
