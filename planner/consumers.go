package planner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// consumers lists the datasets refill does not manage that OpenLineage
// saw read a dataset the plan rewrites: the output of a reported edge that
// matches no refill dataset, whose input matches one of the plan's steps,
// or one of the lineage-only datasets (views) whose rows the steps change
// (openlineage.Matcher has the rule). They add no step — refill cannot
// rebuild what it does not manage — but the plan names them, and policy
// keeps such a plan from being auto. Each consumer, dataset read and job
// is listed once, with the latest time it was seen; only direct readers
// are listed, not what reads them in turn.
func (p *Planner) consumers(ctx context.Context, plan *refill.Plan, changed []string) ([]refill.Consumer, error) {
	if p.Store == nil {
		return nil, nil
	}
	edges, err := p.Store.LineageEdges(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenLineage edges: %w", err)
	}
	if len(edges) == 0 {
		return nil, nil
	}
	rebuilt := map[string]bool{}
	for _, st := range plan.Steps {
		rebuilt[st.Dataset] = true
	}
	for _, n := range changed {
		rebuilt[n] = true
	}
	m := openlineage.NewMatcher(p.Config.Datasets)
	type key struct{ namespace, dataset, reads, jobNamespace, job string }
	found := map[key]refill.Consumer{}
	for _, e := range edges {
		if m.Managed(e.Output) {
			continue
		}
		for _, d := range m.Match(e.Input) {
			if !rebuilt[d] {
				continue
			}
			c := refill.Consumer{Dataset: e.Output.Name, Namespace: e.Output.Namespace, Reads: d,
				Job: e.Job.Name, JobNamespace: e.Job.Namespace, Producer: e.Producer, LastSeen: e.LastSeen.UTC()}
			k := key{c.Namespace, c.Dataset, c.Reads, c.JobNamespace, c.Job}
			if old, ok := found[k]; !ok || c.LastSeen.After(old.LastSeen) {
				found[k] = c
			}
		}
	}
	out := make([]refill.Consumer, 0, len(found))
	for _, c := range found {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b refill.Consumer) int {
		return cmp.Or(strings.Compare(a.Reads, b.Reads), strings.Compare(a.Dataset, b.Dataset), strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Job, b.Job), strings.Compare(a.JobNamespace, b.JobNamespace))
	})
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
