package lineage

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

var update = flag.Bool("update", false, "rewrite golden files")

// ds builds datasets from "name<-up1,up2" specs; names starting with "src"
// are sources.
func ds(specs ...string) map[string]*refill.Dataset {
	out := map[string]*refill.Dataset{}
	for _, s := range specs {
		name, ups, _ := strings.Cut(s, "<-")
		d := &refill.Dataset{Name: name, Table: name}
		if ups != "" {
			d.Upstream = strings.Split(ups, ",")
		}
		if !strings.HasPrefix(name, "src") {
			d.Job = &refill.Job{Kind: refill.JobQuery, Query: "SELECT :partition"}
		}
		out[name] = d
	}
	return out
}

func setup(t *testing.T, specs ...string) *Graph {
	t.Helper()
	g, err := New(ds(specs...))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func orders(c Closure) map[string]int {
	m := map[string]int{}
	for _, n := range c.Steps {
		m[n.Dataset.Name] = n.Order
	}
	return m
}

func TestClosureDiamond(t *testing.T) {
	// src -> a -> b -> d ; a -> c -> d ; src2 -> c ; e is unrelated.
	g := setup(t, "src", "src2", "a<-src", "b<-a", "c<-a,src2", "d<-b,c", "e<-src2")
	c, err := g.Closure([]string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"a": 1, "b": 2, "c": 2, "d": 3}
	got := orders(c)
	if len(got) != len(want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("order of %s = %d, want %d", k, got[k], v)
		}
	}
	if strings.Join(c.Sources, ",") != "src,src2" {
		t.Errorf("sources = %v, want src,src2 (src2 feeds c)", c.Sources)
	}
	if strings.Join(c.Downstream, ",") != "b,c,d" {
		t.Errorf("downstream = %v, want b,c,d", c.Downstream)
	}
	for i := 1; i < len(c.Steps); i++ {
		if c.Steps[i].Order < c.Steps[i-1].Order {
			t.Errorf("steps not in order: %v", c.Steps)
		}
	}
}

func TestClosureSourceTargetRebuildsEverythingDownstream(t *testing.T) {
	g := setup(t, "src", "a<-src", "b<-a", "c<-src", "other")
	c, err := g.Closure([]string{"src"})
	if err != nil {
		t.Fatal(err)
	}
	got := orders(c)
	if len(got) != 3 || got["a"] != 1 || got["c"] != 1 || got["b"] != 2 {
		t.Errorf("steps = %v, want a:1 c:1 b:2", got)
	}
	if _, ok := got["src"]; ok {
		t.Error("a source is never a step")
	}
	if strings.Join(c.Sources, ",") != "src" {
		t.Errorf("sources = %v", c.Sources)
	}
}

func TestClosureOrderIgnoresUpstreamOutsideClosure(t *testing.T) {
	// b depends on a, but only b is requested: b runs first.
	g := setup(t, "src", "a<-src", "b<-a")
	c, err := g.Closure([]string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := orders(c); len(got) != 1 || got["b"] != 1 {
		t.Errorf("steps = %v, want only b at order 1", got)
	}
	if strings.Join(c.Sources, ",") != "src" {
		t.Errorf("sources = %v, want src (transitively upstream)", c.Sources)
	}
	if len(c.Downstream) != 0 {
		t.Errorf("downstream = %v, want none", c.Downstream)
	}
}

func TestUnknownTarget(t *testing.T) {
	g := setup(t, "src", "a<-src")
	_, err := g.Closure([]string{"nope"})
	if !errors.Is(err, refill.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "known: a, src") {
		t.Errorf("err = %v", err)
	}
}

func TestCycleIsNamed(t *testing.T) {
	_, err := New(ds("src", "a<-src,c", "b<-a", "c<-b"))
	if !errors.Is(err, refill.ErrBadInput) {
		t.Fatalf("err = %v, want bad input", err)
	}
	if !strings.Contains(err.Error(), "a -> b -> c -> a") {
		t.Errorf("err = %v, want the cycle a -> b -> c -> a", err)
	}
}

func TestNeighbourhood(t *testing.T) {
	g := setup(t, "src", "src2", "a<-src", "b<-a", "c<-src2")
	got, err := g.Neighbourhood("a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a,b,src" {
		t.Errorf("neighbourhood = %v", got)
	}
}

func TestPicturesGolden(t *testing.T) {
	d := ds("src", "a<-src", "b<-a", "c<-a")
	d["b"].Tags = []string{"aggregate"}
	d["c"].Job = &refill.Job{Kind: refill.JobCommand, Command: []string{"x"}}
	g, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	h := Highlight{Targets: map[string]bool{"a": true}, Rebuilt: map[string]bool{"b": true, "c": true}}
	golden(t, "lineage.dot", g.DOT(g.Names(), h))
	golden(t, "lineage.mmd", g.Mermaid(g.Names(), h))
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
