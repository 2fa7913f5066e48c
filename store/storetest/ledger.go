package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseLedger covers "no row without its entry": for every table whose
// rows change a decision, a row written behind refill's back (no entry,
// or a real row's copy with other content) counts for nothing, a deleted
// freeze or cancel still holds, a revocation erased from its row still
// stands, and VerifyRows names each such row and entry.
func exerciseLedger(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("ForgedRowsCountForNothing", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		db := s.DB()
		p := planOver(t, s, "p-led", at(0), "orders", "2026-11-01")
		exec := func(q string) {
			t.Helper()
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		update := func(f func(tx *store.Tx) error) {
			t.Helper()
			if err := s.Update(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if problems, err := s.VerifyRows(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("VerifyRows of a new store = %v, %v", problems, err)
		}

		// The real decisions, each with its entry.
		real := refill.Acceptance{Dataset: "ev", Partition: "2026-11-02", Check: "not_null", Column: "amount", By: "carol", Reason: "outage", At: at(1), Measured: "rows=10 nulls=4"}
		update(func(tx *store.Tx) error {
			if err := RecordApproval(ctx, tx, refill.Approval{PlanID: p.ID, PlanHash: p.Hash, Actor: "bob", Decision: refill.DecisionApprove, At: at(1)}); err != nil {
				return err
			}
			if err := RecordStep(ctx, tx, refill.ChecklistStep{PlanID: p.ID, Step: refill.ChecklistSnapshot, Actor: "ana", At: at(1)}); err != nil {
				return err
			}
			if err := RecordAccept(ctx, tx, real); err != nil {
				return err
			}
			if err := RecordFlags(ctx, tx, []refill.Flag{{Dataset: "ev", Partition: "2026-11-03", Check: "volume", PlanID: p.ID}}); err != nil {
				return err
			}
			if err := RecordSchemaAccept(ctx, tx, refill.SchemaSnapshot{Dataset: "ev", Columns: []refill.Column{{Name: "amount", Type: "real"}}, AcceptedBy: "carol", Reason: "new"}); err != nil {
				return err
			}
			if err := RecordToken(ctx, tx, refill.Token{ID: "tok-real", User: "bob", CreatedBy: "bob", CreatedAt: at(1)}, "sha256:real"); err != nil {
				return err
			}
			if _, _, err := RecordFreeze(ctx, tx, &refill.Freeze{By: "carol", Reason: "quarter close", At: at(2)}, ""); err != nil {
				return err
			}
			return RecordCancel(ctx, tx, refill.CancelRequest{PlanID: p.ID, Actor: "ana", Reason: "wrong range", At: at(2)})
		})
		if problems, err := s.VerifyRows(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("VerifyRows of real decisions = %v, %v", problems, err)
		}

		// Behind refill's back: a copy of each real row with other
		// content, or a row with no entry at all.
		exec(`INSERT INTO approvals (plan_id, plan_hash, actor, decision, note, at) SELECT plan_id, plan_hash, 'mallory', decision, note, at FROM approvals`)
		exec(`INSERT INTO checklist (plan_id, step, actor, note, detail, at) SELECT plan_id, 'scope', actor, note, detail, at FROM checklist`)
		exec(`INSERT INTO acceptances (dataset, partition, check_name, column_name, measured, accepted_by, reason, accepted_at)
			SELECT dataset, '2026-11-04', check_name, column_name, measured, accepted_by, reason, accepted_at FROM acceptances`)
		exec(`INSERT INTO gate_flags (dataset, partition, "check", plan_id, flagged_at) SELECT dataset, '2026-11-05', "check", plan_id, flagged_at FROM gate_flags`)
		exec(`INSERT INTO schema_snapshots (dataset, plan_id, columns, recorded_at, accepted_by, reason) SELECT dataset, plan_id, '[{"name":"x","type":"text"}]', recorded_at, accepted_by, reason FROM schema_snapshots`)
		exec(`INSERT INTO api_tokens (id, hash, user_name, created_by, created_at) VALUES ('tok-forged', 'sha256:forged', 'carol', 'carol', '2026-11-05T09:00:03Z')`)
		exec(`UPDATE api_tokens SET hash = 'sha256:mine' WHERE id = 'tok-real'`)
		update(func(tx *store.Tx) error {
			return RecordToken(ctx, tx, refill.Token{ID: "tok-exp", User: "bob", CreatedBy: "bob", CreatedAt: at(1), ExpiresAt: at(3600)}, "sha256:exp")
		})
		exec(`UPDATE api_tokens SET expires_at = '2099-01-01T00:00:00Z' WHERE id = 'tok-exp'`)
		exec(`DELETE FROM freezes`)
		exec(`DELETE FROM cancel_requests`)

		if got, _ := s.Approvals(ctx, p.ID); len(got) != 1 || got[0].Actor != "bob" {
			t.Errorf("Approvals with a forged row = %+v, want bob's alone", got)
		}
		if got, _ := s.Checklist(ctx, p.ID); len(got) != 1 || got[0].Step != refill.ChecklistSnapshot {
			t.Errorf("Checklist with a forged scope = %+v, want the snapshot alone", got)
		}
		if got, _ := s.Acceptances(ctx, "ev", "2026-11-04"); len(got) != 0 {
			t.Errorf("a copied acceptance counts on another partition: %+v", got)
		}
		if got, _ := s.Acceptances(ctx, "ev", "2026-11-02"); len(got) != 1 || got[0].By != "carol" {
			t.Errorf("the real acceptance: %+v", got)
		}
		if got, _ := s.Flagged(ctx, "ev"); len(got) != 1 || !got["2026-11-03"] {
			t.Errorf("Flagged with a forged flag = %v, want 2026-11-03 alone", got)
		}
		if got, _, _ := s.SchemaBaseline(ctx, "ev"); len(got.Columns) != 1 || got.Columns[0].Name != "amount" {
			t.Errorf("SchemaBaseline with a forged baseline = %+v, want carol's accepted one", got)
		}
		for _, hash := range []string{"sha256:forged", "sha256:mine", "sha256:exp"} {
			if tok, err := s.TokenByHash(ctx, hash); err == nil {
				t.Errorf("a token no entry made with hash %s opened as %+v", hash, tok)
			}
		}
		if f, frozen, _ := s.Freeze(ctx); !frozen || f.By != "carol" {
			t.Errorf("the freeze whose row was deleted: %+v, %v; want carol's still in force", f, frozen)
		}
		if c, asked, _ := s.CancelRequested(ctx, p.ID); !asked || c.Actor != "ana" {
			t.Errorf("the cancel whose row was deleted: %+v, %v; want ana's still in force", c, asked)
		}

		problems, err := s.VerifyRows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for _, pr := range problems {
			tables = append(tables, pr.Table)
		}
		for _, want := range []string{"approvals", "checklist", "acceptances", "gate_flags", "schema_snapshots", "api_tokens", "freezes", "cancel_requests"} {
			if !slices.Contains(tables, want) {
				t.Errorf("VerifyRows named nothing in %s: %v", want, problems)
			}
		}
		var text []string
		for _, pr := range problems {
			text = append(text, pr.String())
		}
		all := strings.Join(text, "\n")
		for _, want := range []string{"the approve of plan p-led by mallory has no audit entry", "the token tok-real of bob has no audit entry",
			"(freeze by carol) is in force, but its row is gone", "(a cancel of plan p-led by ana) has no row"} {
			if !strings.Contains(all, want) {
				t.Errorf("VerifyRows does not say %q:\n%s", want, all)
			}
		}

		// A revocation erased from its row still stands; an unfreeze ends
		// a freeze whose row is gone; a freeze row no entry made freezes
		// nothing.
		update(func(tx *store.Tx) error {
			_, err := RecordRevoke(ctx, tx, real, refill.Accepted{By: "carol", Reason: "not an outage", At: at(5)})
			return err
		})
		exec(`UPDATE acceptances SET revoked_by = NULL, revoked_reason = NULL, revoked_at = NULL`)
		if got, _ := s.Acceptances(ctx, "ev", "2026-11-02"); len(got) != 1 || got[0].Revoked == nil || got[0].Revoked.By != "carol" {
			t.Errorf("a revocation erased from its row: %+v, want it revoked by carol", got)
		}
		update(func(tx *store.Tx) error {
			_, _, err := RecordFreeze(ctx, tx, nil, "carol")
			return err
		})
		exec(`INSERT INTO freezes (id, frozen_by, reason, frozen_at) VALUES (1, 'mallory', 'forged', '2026-11-05T09:00:09Z')`)
		if f, frozen, _ := s.Freeze(ctx); frozen {
			t.Errorf("a freeze row no entry made froze: %+v", f)
		}
		problems, _ = s.VerifyRows(ctx)
		text = text[:0]
		for _, pr := range problems {
			text = append(text, pr.String())
		}
		all = strings.Join(text, "\n")
		for _, want := range []string{"does not say it was ended, but audit entry", "the freeze by mallory (forged) has no audit entry in force"} {
			if !strings.Contains(all, want) {
				t.Errorf("VerifyRows does not say %q:\n%s", want, all)
			}
		}

		// A plan rewritten in place — another tier, rehashed so that it
		// still agrees with itself — is not the plan its entry recorded.
		forged := *p
		forged.Tier = refill.TierAuto
		forged.Hash = forged.ComputeHash()
		body, err := json.Marshal(&forged)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, s.Rebind(`UPDATE plans SET body = ?, hash = ?, tier = 'auto' WHERE id = ?`), string(body), forged.Hash, p.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Plan(ctx, p.ID); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "its audit entry recorded hash") {
			t.Errorf("a plan rewritten in place loads: %+v, %v", got, err)
		}
		if got, err := s.PlansByID(ctx, []string{p.ID}); !errors.Is(err, refill.ErrVerification) {
			t.Errorf("PlansByID of a plan rewritten in place: %+v, %v", got, err)
		}
		problems, _ = s.VerifyRows(ctx)
		if !slices.ContainsFunc(problems, func(pr store.RowProblem) bool { return pr.Table == "plans" && pr.Row == p.ID }) {
			t.Errorf("VerifyRows does not name the rewritten plan: %v", problems)
		}
	})

	t.Run("LineageByTheLog", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		n := func(ns, name string) refill.OpenLineageName { return refill.OpenLineageName{Namespace: ns, Name: name} }
		real := store.LineageEdge{Input: n("pg", "main.sessions"), Output: n("bi", "exec_dashboard"), Job: n("bi", "sync"), FirstSeen: at(1), LastSeen: at(1)}
		if _, err := s.RecordLineage(ctx, []store.LineageEdge{real}, store.LineageReport{Actor: "ol", Job: "bi/sync"}); err != nil {
			t.Fatal(err)
		}
		// Deleted behind refill's back, the edge still counts (it raises
		// a plan's tier, and the log decides); a forged one does not.
		if _, err := s.DB().ExecContext(ctx, `DELETE FROM lineage_edges`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO lineage_edges (edge_key, input_namespace, input_name, output_namespace, output_name, job_namespace, job_name, producer, first_seen, last_seen)
			VALUES ('forged', 'pg', 'main.orders', 'bi', 'x', 'bi', 'sync', 'p', '2026-11-05T09:00:01Z', '2026-11-05T09:00:01Z')`); err != nil {
			t.Fatal(err)
		}
		got, err := s.LineageEdges(ctx)
		if err != nil || len(got) != 1 || got[0].Output != real.Output {
			t.Fatalf("LineageEdges = %+v, %v; want the deleted real edge alone", got, err)
		}
		problems, _ := s.VerifyRows(ctx)
		var text []string
		for _, pr := range problems {
			if pr.Table == "lineage_edges" {
				text = append(text, pr.String())
			}
		}
		if all := strings.Join(text, "\n"); len(text) != 2 || !strings.Contains(all, "main.orders -> bi/x has no audit entry") || !strings.Contains(all, "made a row that is gone") {
			t.Errorf("VerifyRows of lineage_edges = %q", text)
		}
		// The same edge reported for real is recorded, with its entry.
		forged := store.LineageEdge{Input: n("pg", "main.orders"), Output: n("bi", "x"), Job: n("bi", "sync"), FirstSeen: at(2), LastSeen: at(2)}
		if added, err := s.RecordLineage(ctx, []store.LineageEdge{forged}, store.LineageReport{Actor: "ol"}); err != nil || added != 1 {
			t.Fatalf("RecordLineage of a reported edge = %d, %v", added, err)
		}
	})
}
