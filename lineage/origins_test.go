package lineage

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// originsSetup is src -> a -> b (b imported from dbt), a -> c, and what
// OpenLineage saw: a job writing c from a (declared too), b read by a
// dashboard outside refill (twice, by two jobs: the later one wins), an
// outside feed read into a, a name outside refill that is also a refill
// dataset's name, and two edges that belong to no picture of refill's.
func originsSetup(t *testing.T) (*Graph, []Observed, func(refill.OpenLineageName) []string) {
	t.Helper()
	d := ds("src", "a<-src", "b<-a", "c<-a")
	d["b"].From = "dbt:target/manifest.json"
	g, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	at := func(day int) time.Time { return time.Date(2026, 11, day, 8, 30, 0, 0, time.UTC) }
	n := func(ns, name string) refill.OpenLineageName { return refill.OpenLineageName{Namespace: ns, Name: name} }
	seen := []Observed{
		{Input: n("pg", "db.public.a"), Output: n("pg", "db.public.c"), Job: "airflow.build_c", LastSeen: at(28)},
		{Input: n("pg", "db.public.b"), Output: n("bi", "finance.dashboard"), Job: "metabase.sync", LastSeen: at(29)},
		{Input: n("pg", "db.public.b"), Output: n("bi", "finance.dashboard"), Job: "metabase.sync_v2", LastSeen: at(30)},
		{Input: n("s3", "feeds/partner"), Output: n("pg", "db.public.a"), Job: "loader", LastSeen: at(27)},
		{Input: n("pg", "db.public.c"), Output: n("bi", "c"), Job: "export", LastSeen: at(26)},
		{Input: n("s3", "feeds/partner"), Output: n("bi", "finance.dashboard"), Job: "elsewhere", LastSeen: at(26)},
		{Input: n("pg", "db.public.c"), Output: n("pg", "db.public.c"), Job: "merge", LastSeen: at(26)},
	}
	match := func(d refill.OpenLineageName) []string {
		if d.Namespace == "pg" {
			name := d.Name[strings.LastIndex(d.Name, ".")+1:]
			if g.datasets[name] != nil {
				return []string{name}
			}
		}
		return nil
	}
	return g, seen, match
}

func TestPictureOrigins(t *testing.T) {
	g, seen, match := originsSetup(t)
	p := g.Picture(g.Names(), seen, match)
	var got []string
	for _, e := range p.Edges {
		s := e.From + " -> " + e.To + " " + string(e.Origin)
		if e.Job != "" {
			s += " " + e.Job
		}
		got = append(got, s)
	}
	want := []string{
		"a -> b dbt", "a -> c config", "src -> a config",
		"a -> c openlineage airflow.build_c",
		"b -> finance.dashboard openlineage metabase.sync_v2",
		"c -> bi/c openlineage export",
		"feeds/partner -> a openlineage loader",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("edges:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(p.External) != 3 || p.External[0].ID != "bi/c" || p.External[1].ID != "feeds/partner" || p.External[2] != (External{ID: "finance.dashboard", Namespace: "bi", Name: "finance.dashboard"}) {
		t.Errorf("external: %+v", p.External)
	}
	b, _ := json.Marshal(p.Edges[4])
	if string(b) != `{"from":"b","to":"finance.dashboard","origin":"openlineage","job":"metabase.sync_v2","last_seen":"2026-11-30T08:30:00Z"}` {
		t.Errorf("an OpenLineage edge in JSON: %s", b)
	}
	b, _ = json.Marshal(p.Edges[0])
	if string(b) != `{"from":"a","to":"b","origin":"dbt"}` {
		t.Errorf("a dbt edge in JSON: %s", b)
	}

	// One dataset's neighbourhood keeps only the edges whose refill ends
	// are in it: b's has no c, so c's export is not drawn.
	names, err := g.Neighbourhood("b")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range g.Picture(names, seen, match).Edges {
		if e.From == "c" || e.To == "c" || e.To == "bi/c" {
			t.Errorf("b's neighbourhood draws %+v", e)
		}
	}
}

func TestPictureOriginsGolden(t *testing.T) {
	g, seen, match := originsSetup(t)
	p := g.Picture(g.Names(), seen, match)
	h := Highlight{Targets: map[string]bool{"a": true}}
	dot := g.DrawDOT(p, h)
	golden(t, "lineage-origins.dot", dot)
	if svg, err := SVG(t.Context(), dot); err != nil || !strings.Contains(string(svg), "seen by OpenLineage") {
		t.Errorf("graphviz cannot draw the picture: %v", err)
	}
	golden(t, "lineage-origins.mmd", g.DrawMermaid(p, h))
	golden(t, "lineage-origins.txt", p.Text())
	// Without OpenLineage the legend names only what is drawn.
	if dot := g.DOT(g.Names(), h); !strings.Contains(dot, "legend_dbt") || strings.Contains(dot, "OpenLineage") {
		t.Errorf("declared and dbt edges: the legend is wrong:\n%s", dot)
	}
}

// TestExternalIDsAreUnique: names outside refill that clash with each
// other, with a refill dataset, or with another's namespace/name still
// get one node each, in DOT and in Mermaid.
func TestExternalIDsAreUnique(t *testing.T) {
	d := ds("src", "c<-src", "ol_1<-src")
	g, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	n := func(ns, name string) refill.OpenLineageName { return refill.OpenLineageName{Namespace: ns, Name: name} }
	match := func(x refill.OpenLineageName) []string {
		if x.Namespace == "pg" {
			return []string{x.Name}
		}
		return nil
	}
	var seen []Observed
	for _, out := range []refill.OpenLineageName{n("bi", "c"), n("q", "bi/c"), n("x", "dash"), n("y", "dash")} {
		seen = append(seen, Observed{Input: n("pg", "c"), Output: out, Job: "j"})
	}
	p := g.Picture(g.Names(), seen, match)
	var ids []string
	for _, x := range p.External {
		ids = append(ids, x.ID)
	}
	if got := strings.Join(ids, " | "); got != "bi/c | bi/c #2 | x/dash | y/dash" {
		t.Errorf("external IDs %s", got)
	}
	if len(p.Edges) != 2+4 {
		t.Errorf("edges %+v", p.Edges)
	}
	mmd := g.DrawMermaid(p, Highlight{})
	if strings.Count(mmd, "ol_1[") != 1 || !strings.Contains(mmd, "ol_3[\"c<br/>outside refill\"]") {
		t.Errorf("mermaid reuses a dataset's ID:\n%s", mmd)
	}
}
