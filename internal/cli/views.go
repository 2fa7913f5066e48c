package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/watch"
)

// view renders what a command has to say, in the one form chosen for the
// whole invocation by -o: text for a person, or exactly one JSON document
// for a script (terraform's views). Commands compute; they render only
// through their method of the view, so the two forms cannot drift apart.
type view interface {
	Plan(p *refill.Plan, cfg *refill.Config) error
	State(s *control.State, cfg *refill.Config) error
	Plans(list []refill.PlanSummary) error
	Report(rep control.Report) error
	History(h control.PartitionHistory) error
	Accepted(a refill.Acceptance) error
	Check(v refill.GateVerdict, datasets []string, rng refill.Range) error
	Proof(pr *refill.Proof) error
	Lineage(format string, pic lineage.Picture, text string) error
	Audit(rep control.AuditCheck, verr error) error
	Snapshot(s *control.State, parts []refill.SnapshotPart) error
	Dropped(planID string, tables []string) error
	Schema(snap refill.SchemaSnapshot, actor string) error
	Token(plain string, tok refill.Token) error
	Tokens(list []refill.Token) error
	Freeze(f *refill.Freeze, lifted bool) error
	Watch(rep watch.Report) error
}

// view picks the form once, from -o.
func (a *app) view() view {
	if a.json() {
		return jsonView{a}
	}
	return textView{a}
}

type jsonView struct{ a *app }

func (v jsonView) Plan(p *refill.Plan, _ *refill.Config) error    { return v.a.printJSON(p) }
func (v jsonView) State(s *control.State, _ *refill.Config) error { return v.a.printJSON(stateJSON(s)) }
func (v jsonView) Plans(list []refill.PlanSummary) error {
	if list == nil {
		list = []refill.PlanSummary{}
	}
	return v.a.printJSON(list)
}
func (v jsonView) Report(rep control.Report) error          { return v.a.printJSON(rep) }
func (v jsonView) History(h control.PartitionHistory) error { return v.a.printJSON(h) }
func (v jsonView) Accepted(a refill.Acceptance) error       { return v.a.printJSON(a) }
func (v jsonView) Check(g refill.GateVerdict, _ []string, _ refill.Range) error {
	return v.a.printJSON(g)
}
func (v jsonView) Proof(pr *refill.Proof) error { return v.a.printJSON(pr) }
func (v jsonView) Lineage(format string, pic lineage.Picture, text string) error {
	return v.a.printJSON(map[string]any{"format": format, "datasets": pic.Datasets, "external": pic.External, "edges": pic.Edges, "text": text})
}
func (v jsonView) Audit(rep control.AuditCheck, _ error) error {
	return v.a.printJSON(rep)
}
func (v jsonView) Snapshot(s *control.State, parts []refill.SnapshotPart) error {
	return v.a.printJSON(map[string]any{"plan": stateJSON(s), "partitions": parts})
}
func (v jsonView) Dropped(planID string, tables []string) error {
	return v.a.printJSON(map[string]any{"plan_id": planID, "dropped": tables})
}
func (v jsonView) Schema(snap refill.SchemaSnapshot, _ string) error { return v.a.printJSON(snap) }
func (v jsonView) Token(plain string, tok refill.Token) error {
	return v.a.printJSON(struct {
		refill.Token
		Secret string `json:"token,omitempty"`
	}{tok, plain})
}
func (v jsonView) Tokens(list []refill.Token) error {
	if list == nil {
		list = []refill.Token{}
	}
	return v.a.printJSON(list)
}
func (v jsonView) Watch(rep watch.Report) error { return v.a.printJSON(rep) }
func (v jsonView) Freeze(f *refill.Freeze, lifted bool) error {
	return v.a.printJSON(map[string]any{"frozen": f != nil && !lifted, "freeze": f})
}

type textView struct{ a *app }

func (v textView) print(s string) error {
	return printPainted(v.a.stdout, s, v.a.color())
}

func (v textView) Plan(p *refill.Plan, cfg *refill.Config) error { return v.print(renderPlan(p, cfg)) }
func (v textView) State(s *control.State, cfg *refill.Config) error {
	return v.print(renderPlan(s.Plan, cfg) + renderState(s))
}
func (v textView) Plans(list []refill.PlanSummary) error { return v.print(renderPlans(list)) }
func (v textView) Report(rep control.Report) error       { return v.print(renderReport(rep)) }
func (v textView) Accepted(acc refill.Acceptance) error  { return v.print(renderAccepted(acc)) }
func (v textView) History(h control.PartitionHistory) error {
	return v.print(renderHistory(h.Dataset, h.Partition, h.Plans) + renderAcceptances(h.Acceptances) + renderSchemaChanges(h.Dataset, h.SchemaBaselines))
}
func (v textView) Check(g refill.GateVerdict, datasets []string, rng refill.Range) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Checked %s for %s..%s (%d %s)\n\n", strings.Join(datasets, ", "), rng.FromString(), rng.ToString(), rng.Days(), plural(rng.Days(), "day", "days"))
	renderGate(&b, g)
	if len(g.Findings) == 0 {
		b.WriteString("  every partition passed every check\n")
	}
	return v.print(b.String())
}
func (v textView) Proof(pr *refill.Proof) error { return v.print(renderProof(pr)) }
func (v textView) Lineage(_ string, _ lineage.Picture, text string) error {
	return v.print(text)
}
func (v textView) Audit(rep control.AuditCheck, verr error) error {
	if verr != nil {
		return nil // the error itself says what is broken
	}
	keyed := "unkeyed"
	if rep.Keyed {
		keyed = fmt.Sprintf("keyed from entry %d", rep.KeyedFrom)
	}
	if err := v.print(fmt.Sprintf("audit log intact: %d entries, %s, head %s; %s\n", rep.Entries, keyed, rep.Head, rep.AnchorNote)); err != nil {
		return err
	}
	if rep.Warning != "" {
		fmt.Fprintf(v.a.stderr, "warning: %s\n", rep.Warning)
	}
	return nil
}
func (v textView) Snapshot(s *control.State, parts []refill.SnapshotPart) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tPARTITION\tROWS\tCHECKSUM\tTABLE")
	for _, p := range parts {
		name := p.Dataset
		if p.Source {
			name += " (source)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, p.Partition, humanize.Comma(p.Digest.Rows), p.Digest.Checksum, p.SnapshotTable)
	}
	tw.Flush()
	return v.print(b.String() + renderState(s))
}
func (v textView) Dropped(planID string, tables []string) error {
	return v.print(fmt.Sprintf("plan %s: dropped %d snapshot table(s): %s\n", planID, len(tables), strings.Join(tables, ", ")))
}
func (v textView) Schema(snap refill.SchemaSnapshot, actor string) error {
	var cols []string
	for _, col := range snap.Columns {
		cols = append(cols, col.Name+" "+col.Type)
	}
	return v.print(fmt.Sprintf("%s: accepted by %s as the drift baseline (%s)\n  columns: %s\n", snap.Dataset, actor, refill.OneLine(snap.Reason), strings.Join(cols, ", ")))
}

func (v textView) Token(plain string, tok refill.Token) error {
	expires := "never expires"
	if !tok.ExpiresAt.IsZero() {
		expires = "expires " + tok.ExpiresAt.Format("2006-01-02 15:04 MST")
	}
	if plain == "" {
		return v.print(fmt.Sprintf("token %s of %s revoked\n", tok.ID, tok.User))
	}
	return v.print(fmt.Sprintf("%s\n\ntoken %s for %s (%s). It is shown this once and only its hash is kept:\nsend it as \"Authorization: Bearer TOKEN\"; revoke it with refill token revoke %s\n", plain, tok.ID, tok.User, expires, tok.ID))
}

func (v textView) Tokens(list []refill.Token) error {
	if len(list) == 0 {
		return v.print("no tokens (refill token create --as USER)\n")
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tUSER\tCREATED\tEXPIRES\tSTATE")
	for _, t := range list {
		exp, state := "never", "live"
		if !t.ExpiresAt.IsZero() {
			exp = t.ExpiresAt.Format("2006-01-02 15:04")
		}
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked " + t.RevokedAt.Format("2006-01-02 15:04")
		case !t.Live(time.Now()):
			state = "expired"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, t.CreatedAt.Format("2006-01-02 15:04"), exp, state)
	}
	w.Flush()
	return v.print(b.String())
}

func (v textView) Freeze(f *refill.Freeze, lifted bool) error {
	if lifted {
		return v.print(fmt.Sprintf("unfrozen: automatic applies run again (frozen by %s since %s: %s)\n", f.By, f.At.Format("2006-01-02 15:04"), refill.OneLine(f.Reason)))
	}
	if f == nil {
		return v.print("not frozen\n")
	}
	return v.print(fmt.Sprintf("FROZEN by %s since %s: %s\nno automatic apply (auto plans, the watcher) runs until a lead runs refill unfreeze\n", f.By, f.At.Format("2006-01-02 15:04"), refill.OneLine(f.Reason)))
}

func (v textView) Watch(rep watch.Report) error { return v.print(renderWatch(rep)) }
