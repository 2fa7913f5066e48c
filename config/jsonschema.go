package config

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of refill.yaml's JSON Schema.
const SchemaID = "https://github.com/refill-dev/refill/refill.schema.json"

// descriptions say, for editors, what the main keys are: by Go type and
// field, as jsonschema.Reflector.LookupComment asks.
var descriptions = map[string]string{
	"rawConfig":                   "refill.yaml: what refill backfills, where, and how far it trusts a backfill to run on its own.",
	"rawConfig.Version":           "The config's version: 1.",
	"rawConfig.Warehouse":         "The warehouse's DSN: sqlite:PATH, duckdb:PATH (a refill built with -tags duckdb) or postgres://…",
	"rawConfig.State":             "The state store's DSN (plans, proofs, the audit log); default sqlite:.refill/state.db.",
	"rawConfig.StateEnv":          "The environment variable holding the state store's DSN instead.",
	"rawConfig.StateFile":         "The file holding the state store's DSN instead.",
	"rawConfig.ProofWarehouse":    "Where command jobs are proven idempotent; never the warehouse.",
	"rawConfig.DatasetsFrom":      "Datasets imported from a dbt manifest.",
	"rawConfig.Run":               "How runs run: concurrency, attempts, backoff, tolerance.",
	"rawConfig.Notify":            "Slack and webhooks.",
	"rawConfig.Policy":            "The tiers: auto, semi-auto, manual.",
	"rawConfig.Users":             "The people refill knows, with their roles.",
	"rawConfig.Datasets":          "The datasets, by name.",
	"rawConfig.MaxRangeDays":      "The longest range any request may ask for.",
	"rawConfig.Audit":             "Where the audit chain's key is kept.",
	"rawConfig.Server":            "refill serve's public URL.",
	"rawConfig.Watch":             "How often refill watch looks.",
	"rawConfig.Plan":              "How dry runs are made.",
	"rawConfig.OpenLineage":       "Where runs are sent as OpenLineage events.",
	"rawDataset.Table":            "The dataset's table in the warehouse.",
	"rawDataset.Partition":        "The partition column, grain and timezone.",
	"rawDataset.Upstream":         "The datasets this one is built from.",
	"rawDataset.Tags":             "Tags: manual_tags and aggregate_tags decide tiers.",
	"rawDataset.Checks":           "The source gate's checks of this dataset.",
	"rawDataset.Job":              "How one partition is rebuilt: query, sql, command or airflow.",
	"rawDataset.Key":              "The columns that identify a row, for the dry run's content diff.",
	"rawDataset.Private":          "Columns the content diff's samples never show.",
	"rawDataset.LineageOnly":      "Why the dataset is lineage only: never rebuilt, never gated.",
	"rawJob.Query":                "A SELECT of one partition's rows; :partition is the partition.",
	"rawJob.SQL":                  "Statements that rebuild one partition of the dataset's table.",
	"rawJob.Command":              "An argv, with {{partition}}, {{from}}, {{to}}, {{start}}, {{end}}.",
	"rawJob.ProofCommand":         "The argv a proof runs instead (the same program, pointed at the proof warehouse).",
	"rawJob.SideEffects":          "The job writes outside the warehouse: never proven by rerunning, never auto.",
	"rawDatasetsFrom.ProofTarget": "The dbt target that writes to proof_warehouse: imported models are proven through it.",
	"rawPlan.DiffBudget":          "How many rows a plan's content diffs compare in all (0: none).",
}

// defName names a definition by its struct, without the loader's raw
// prefix: rawDataset is Dataset.
func defName(t reflect.Type) string {
	n := t.Name()
	if len(n) > 3 && n[:3] == "raw" {
		return strings.ToUpper(n[3:4]) + n[4:]
	}
	return n
}

// Schema is the JSON Schema (2020-12) of refill.yaml, made from the
// structs the loader reads it into, so that the two cannot disagree:
// every key, its type, and no others. What a schema cannot say (a table
// that exists, an upstream that is a dataset, exactly one of a job's
// kinds) the loader says, with the line.
func Schema() ([]byte, error) {
	r := &jsonschema.Reflector{
		FieldNameTag:               "yaml",
		RequiredFromJSONSchemaTags: true,
		DoNotReference:             false,
		LookupComment: func(t reflect.Type, field string) string {
			key := t.Name()
			if field != "" {
				key += "." + field
			}
			return descriptions[key]
		},
		Namer: defName,
	}
	s := r.Reflect(&rawConfig{})
	s.ID = SchemaID
	s.Title = "refill.yaml"
	if c, ok := s.Definitions["Config"]; ok {
		c.Required = []string{"version"}
	}
	// Fields of any type take several shapes (env as a mapping or a list,
	// accepted_values in two forms): any JSON value, for the loader to
	// judge.
	return json.MarshalIndent(s, "", "  ")
}
