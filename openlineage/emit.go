package openlineage

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// What refill tells lineage tools: every run of a plan is an OpenLineage
// run of the job "backfill" (its namespace openlineage.namespace, default
// refill), START when it begins and COMPLETE, FAIL or ABORT when it ends,
// and each dataset the plan rebuilds a child run of the job
// "backfill.DATASET" under it (a ParentRunFacet), naming what the dataset
// reads and writes, so that a lineage graph shows the rewrite where the
// data lives. The parent's "refill" run facet says which plan it was,
// its tier and reason, who asked and who approved, and how many
// partitions; nominalTime is the plan's range. Run IDs are derived from
// the plan and the audit entry that started the run, so a retried
// delivery sends the same IDs.

// Producer is the producer URI of refill's events.
const Producer = "https://github.com/refill-dev/refill"

// RunEventSchemaURL is the schema refill's events follow.
const RunEventSchemaURL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"

// RefillFacetSchemaURL is the schema of the "refill" run facet, kept in
// the repository (docs/openlineage/RefillRunFacet.json).
const RefillFacetSchemaURL = "https://github.com/refill-dev/refill/blob/main/docs/openlineage/RefillRunFacet.json"

// Facet schema URLs of the standard facets refill sends.
const (
	parentFacetURL  = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
	nominalFacetURL = "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet"
	errorFacetURL   = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
	jobTypeFacetURL = "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
)

// Outcome is how a run ended, as OpenLineage says it.
type Outcome string

// Outcomes.
const (
	Start    Outcome = "START"
	Complete Outcome = "COMPLETE"
	Fail     Outcome = "FAIL"
	Abort    Outcome = "ABORT"
)

// RunReport is one moment of a plan's run to tell.
type RunReport struct {
	Config *refill.Config
	Plan   *refill.Plan
	// Outcome is the run's: Start when it began.
	Outcome Outcome
	// Started is the audit entry that began the run (its seq), which
	// names the run; At is when this moment was recorded.
	Started int64
	At      time.Time
	// Approvers approved the plan, in order.
	Approvers []string
	// Published counts, per dataset, the partitions the plan has
	// published: a dataset whose partitions all are is COMPLETE whatever
	// the run's outcome.
	Published map[string]int
	// Error says why a failed run failed.
	Error string
	// Version is refill's, for the producer URI.
	Version string
}

// RefillFacet is the "refill" run facet.
type RefillFacet struct {
	Producer    string   `json:"_producer"`
	SchemaURL   string   `json:"_schemaURL"`
	PlanID      string   `json:"planId"`
	Hash        string   `json:"hash"`
	Tier        string   `json:"tier"`
	Reason      string   `json:"reason"`
	RequestedBy string   `json:"requestedBy"`
	Approvers   []string `json:"approvers"`
	Partitions  int      `json:"partitions"`
	From        string   `json:"from"`
	To          string   `json:"to"`
}

type facetBase struct {
	Producer  string `json:"_producer"`
	SchemaURL string `json:"_schemaURL"`
}

type outEvent struct {
	EventType string  `json:"eventType"`
	EventTime string  `json:"eventTime"`
	Run       outRun  `json:"run"`
	Job       outJob  `json:"job"`
	Inputs    []outDS `json:"inputs"`
	Outputs   []outDS `json:"outputs"`
	Producer  string  `json:"producer"`
	SchemaURL string  `json:"schemaURL"`
}

type outRun struct {
	RunID  string         `json:"runId"`
	Facets map[string]any `json:"facets,omitempty"`
}

type outJob struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Facets    map[string]any `json:"facets"`
}

type outDS struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// runNamespace derives refill's run IDs (UUID version 5).
var runNamespace = uuid.NewHash(sha1.New(), uuid.NameSpaceURL, []byte(Producer+"/openlineage/run"), 5)

// RunID is the OpenLineage run ID of the run of plan begun by audit entry
// started; dataset "" is the plan's own run, else that dataset's child.
func RunID(plan string, started int64, dataset string) string {
	return uuid.NewSHA1(runNamespace, fmt.Appendf(nil, "%s/%d/%s", plan, started, dataset)).String()
}

// JobName is the job a plan's run (dataset "") or a dataset's child run
// is of.
func JobName(dataset string) string {
	if dataset == "" {
		return "backfill"
	}
	return "backfill." + dataset
}

// Events are the RunEvents of one moment of a run, as JSON, in the order
// to send them: the parent's START before its children's; the children's
// ends before the parent's.
func Events(r RunReport) ([][]byte, error) {
	p, cfg := r.Plan, r.Config
	ns := refill.DefaultOpenLineageNamespace
	if cfg.OpenLineage != nil {
		ns = cfg.OpenLineage.Namespace
	}
	producer := Producer
	if r.Version != "" && r.Version != "dev" {
		producer += "/tree/" + url.PathEscape(r.Version)
	}
	at := r.At.UTC().Format(time.RFC3339Nano)
	base := func(schema string) facetBase { return facetBase{Producer: producer, SchemaURL: schema} }
	jobType := func(kind string) map[string]any {
		return map[string]any{"jobType": struct {
			facetBase
			ProcessingType string `json:"processingType"`
			Integration    string `json:"integration"`
			JobType        string `json:"jobType"`
		}{base(jobTypeFacetURL), "BATCH", "REFILL", kind}}
	}
	parts := 0
	for _, st := range p.Steps {
		parts += len(st.Partitions)
	}
	parentID := RunID(p.ID, r.Started, "")
	parentFacets := map[string]any{
		"refill": RefillFacet{Producer: producer, SchemaURL: RefillFacetSchemaURL, PlanID: p.ID, Hash: p.Hash, Tier: string(p.Tier),
			Reason: p.Request.Reason, RequestedBy: p.Request.RequestedBy, Approvers: nonNil(r.Approvers), Partitions: parts,
			From: p.Request.From, To: p.Request.To},
	}
	if start, end, ok := nominal(p.Request.From, p.Request.To); ok {
		parentFacets["nominalTime"] = struct {
			facetBase
			Start string `json:"nominalStartTime"`
			End   string `json:"nominalEndTime"`
		}{base(nominalFacetURL), start, end}
	}
	if r.Outcome == Fail && r.Error != "" {
		parentFacets["errorMessage"] = errorFacet(base(errorFacetURL), r.Error)
	}
	var inputs, outputs []outDS
	for _, s := range p.Sources {
		inputs = append(inputs, nameOf(cfg, p, s))
	}
	for _, st := range p.Steps {
		outputs = append(outputs, nameOf(cfg, p, st.Dataset))
	}
	parent := outEvent{EventType: string(r.Outcome), EventTime: at,
		Run:    outRun{RunID: parentID, Facets: parentFacets},
		Job:    outJob{Namespace: ns, Name: JobName(""), Facets: jobType("BACKFILL")},
		Inputs: nonNilDS(inputs), Outputs: nonNilDS(outputs), Producer: producer, SchemaURL: RunEventSchemaURL}

	var children []outEvent
	for _, st := range p.Steps {
		outcome := r.Outcome
		if outcome != Start && r.Published[st.Dataset] >= len(st.Partitions) {
			outcome = Complete
		}
		facets := map[string]any{"parent": struct {
			facetBase
			Run outRun `json:"run"`
			Job outDS  `json:"job"`
		}{base(parentFacetURL), outRun{RunID: parentID}, outDS{Namespace: ns, Name: JobName("")}}}
		if outcome == Fail && r.Error != "" {
			facets["errorMessage"] = errorFacet(base(errorFacetURL), r.Error)
		}
		var in []outDS
		for _, u := range st.Upstream {
			in = append(in, nameOf(cfg, p, u))
		}
		children = append(children, outEvent{EventType: string(outcome), EventTime: at,
			Run:    outRun{RunID: RunID(p.ID, r.Started, st.Dataset), Facets: facets},
			Job:    outJob{Namespace: ns, Name: JobName(st.Dataset), Facets: jobType(strings.ToUpper(string(st.Kind)))},
			Inputs: nonNilDS(in), Outputs: []outDS{nameOf(cfg, p, st.Dataset)}, Producer: producer, SchemaURL: RunEventSchemaURL})
	}
	evs := append([]outEvent{parent}, children...)
	if r.Outcome != Start {
		evs = append(children, parent)
	}
	out := make([][]byte, len(evs))
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("openlineage: %w", err)
		}
		out[i] = b
	}
	return out, nil
}

func errorFacet(b facetBase, msg string) any {
	return struct {
		facetBase
		Message  string `json:"message"`
		Language string `json:"programmingLanguage"`
	}{b, msg, "GO"}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilDS(s []outDS) []outDS {
	if s == nil {
		return []outDS{}
	}
	return s
}

// nominal is a range's start (included) and end (excluded) as RFC 3339.
func nominal(from, to string) (string, string, bool) {
	parse := func(s string) (time.Time, time.Duration, bool) {
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t, 24 * time.Hour, true
		}
		if t, err := time.Parse("2006-01-02T15", s); err == nil {
			return t, time.Hour, true
		}
		return time.Time{}, 0, false
	}
	f, _, ok1 := parse(from)
	t, step, ok2 := parse(to)
	if !ok1 || !ok2 {
		return "", "", false
	}
	return f.Format(time.RFC3339), t.Add(step).Format(time.RFC3339), true
}

// nameOf names dataset name of plan p: as the config has it, else as
// the plan sealed it (a dataset removed from the config since still ran
// under the plan), else by its name in the jobs' namespace.
func nameOf(cfg *refill.Config, p *refill.Plan, name string) outDS {
	if d := cfg.Datasets[name]; d != nil {
		return outName(cfg, d)
	}
	for _, st := range p.Steps {
		if st.Dataset == name && st.Ref != nil {
			return outName(cfg, &refill.Dataset{Name: name, Table: st.Ref.Table})
		}
	}
	for _, ss := range p.SourceSeals {
		if ss.Dataset == name && ss.Ref != nil {
			return outName(cfg, &refill.Dataset{Name: name, Table: ss.Ref.Table})
		}
	}
	return outName(cfg, &refill.Dataset{Name: name})
}

// outName is the OpenLineage dataset a refill dataset is in refill's own
// events: its openlineage: pin; else its table in the warehouse's
// namespace, named as OpenLineage's naming conventions name tables
// (postgres://HOST:PORT and DATABASE.SCHEMA.TABLE; sqlite://PATH and the
// table); else, for a job without a table, the dataset's name in the jobs'
// namespace.
func outName(cfg *refill.Config, d *refill.Dataset) outDS {
	if d.OpenLineage != nil {
		return outDS{Namespace: d.OpenLineage.Namespace, Name: d.OpenLineage.Name}
	}
	if d.Table == "" {
		ns := refill.DefaultOpenLineageNamespace
		if cfg.OpenLineage != nil {
			ns = cfg.OpenLineage.Namespace
		}
		return outDS{Namespace: ns, Name: d.Name}
	}
	parts, _ := sqltext.ParseName(d.Table)
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Text
		if !p.Quoted && strings.HasPrefix(cfg.Warehouse, "postgres") {
			names[i] = strings.ToLower(p.Text)
		}
	}
	w := cfg.Warehouse
	switch {
	case strings.HasPrefix(w, "postgres://"), strings.HasPrefix(w, "postgresql://"):
		c, err := pgconn.ParseConfig(w)
		if err != nil {
			break
		}
		if len(names) == 1 {
			names = append([]string{"public"}, names...)
		}
		if c.Database != "" {
			names = append([]string{c.Database}, names...)
		}
		return outDS{Namespace: fmt.Sprintf("postgres://%s:%d", c.Host, c.Port), Name: strings.Join(names, ".")}
	case strings.HasPrefix(w, "duckdb:"):
		if path, ok := dsn.DuckDBPath(w, cfg.Dir); ok {
			if len(names) == 1 {
				names = append([]string{"main"}, names...)
			}
			return outDS{Namespace: "duckdb://" + path, Name: strings.Join(names, ".")}
		}
	case strings.HasPrefix(w, "sqlite:"):
		if path, ok := dsn.SQLitePath(w, cfg.Dir); ok {
			path, _, _ = strings.Cut(path, "?")
			return outDS{Namespace: "sqlite://" + path, Name: strings.Join(names, ".")}
		}
	}
	scheme, _, _ := strings.Cut(dsn.Redact(w), ":")
	return outDS{Namespace: scheme, Name: strings.Join(names, ".")}
}
