package config

import (
	"testing"

	"github.com/refill-dev/refill"
)

// TestOpenLineageName: a dataset may pin its name in OpenLineage events;
// the key is optional, strict and checked for what exact matching needs.
func TestOpenLineageName(t *testing.T) {
	doc := head + `datasets:
  e:
    table: events
    partition: {column: day}
    openlineage: {namespace: "postgres://db:5432", name: analytics.public.events}
  f:
    table: f
    partition: {column: day}
`
	cfg, err := Parse([]byte(doc), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Datasets["e"].OpenLineage; got == nil || *got != (refill.OpenLineageName{Namespace: "postgres://db:5432", Name: "analytics.public.events"}) {
		t.Errorf("e.openlineage = %+v", got)
	}
	if cfg.Datasets["f"].OpenLineage != nil {
		t.Errorf("f has an openlineage name it was not given: %+v", cfg.Datasets["f"].OpenLineage)
	}

	ds := head + "datasets:\n  e:\n    table: e\n    partition: {column: d}\n"
	for _, tt := range []struct{ name, doc, key, msg string }{
		{"no name", ds + "    openlineage: {namespace: pg} # <-\n", "datasets.e.openlineage.name", "required: the name OpenLineage events give"},
		{"no namespace", ds + "    openlineage: {name: a.b} # <-\n", "datasets.e.openlineage.namespace", "required"},
		{"unknown key", ds + "    openlineage: {namespace: pg, name: a, table: b} # <-\n", "datasets.e.openlineage.table", `unknown field "table" (known: name, namespace)`},
		{"not a mapping", ds + "    openlineage: a.b # <-\n", "datasets.e.openlineage", "want a mapping"},
		{"a space", ds + "    openlineage: {namespace: pg, name: 'a.b '} # <-\n", "datasets.e.openlineage.name", "starts or ends with a space"},
		{"a control character", ds + "    openlineage: {namespace: \"p\\tg\", name: a} # <-\n", "datasets.e.openlineage.namespace", "control character"},
		{"taken twice", ds + "    openlineage: {namespace: pg, name: a}\n  g:\n    table: g\n    partition: {column: d}\n    openlineage: {namespace: pg, name: a} # <-\n",
			"datasets.g.openlineage", "also the OpenLineage name of dataset e (line 4)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "refill.yaml")
			requireBadInput(t, err, markedLine(t, tt.doc), tt.key, tt.msg)
		})
	}
}
