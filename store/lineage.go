package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/refill-dev/refill"
)

// LineageEdge is one input → output edge an OpenLineage run reported: the
// job that read Input and wrote Output, the producer of the latest event
// that said so, and the event times it was first and last reported.
type LineageEdge struct {
	Input     refill.OpenLineageName `json:"input"`
	Output    refill.OpenLineageName `json:"output"`
	Job       refill.OpenLineageName `json:"job"`
	Producer  string                 `json:"producer"`
	FirstSeen time.Time              `json:"first_seen"`
	LastSeen  time.Time              `json:"last_seen"`
}

// key identifies the edge: its six names, each length-prefixed so that no
// two different edges share a key, digested so that long names (a file
// path, a URL) still fit an index.
func (e LineageEdge) key() string {
	h := sha256.New()
	for _, s := range []string{e.Input.Namespace, e.Input.Name, e.Output.Namespace, e.Output.Name, e.Job.Namespace, e.Job.Name} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// LineageReport is who reported edges, and in which run: what the audit
// entry of new edges says.
type LineageReport struct {
	Actor    string
	Job      string
	Producer string
	Run      string
}

// RecordLineage records edges in one transaction and returns how many had
// not been recorded before. Recording an edge again changes only its
// window: first seen moves earlier, last seen later (and the producer
// follows the latest event). Since the window comes from the events' own
// times, repeating an event changes nothing at all.
//
// New edges can raise a plan's tier, so they are decisions like any other
// (ledger.go): the same transaction appends one audit entry naming each
// edge that no entry made yet (a new one, or one written into the table
// behind refill's back), as reported by rep; a repeat appends nothing.
func (s *Store) RecordLineage(ctx context.Context, edges []LineageEdge, rep LineageReport) (added int, err error) {
	if len(edges) == 0 {
		return 0, nil
	}
	for _, e := range edges {
		for _, v := range []string{e.Input.Namespace, e.Input.Name, e.Output.Namespace, e.Output.Name, e.Job.Namespace, e.Job.Name, e.Producer} {
			if strings.ContainsRune(v, 0) {
				return 0, refill.BadInputf("lineage: %q holds a NUL character, which the state store cannot keep", v)
			}
		}
	}
	// One order for every writer, so two transactions updating the same
	// edges on PostgreSQL wait for each other instead of deadlocking.
	type keyed struct {
		key string
		LineageEdge
	}
	rows := make([]keyed, len(edges))
	for i, e := range edges {
		rows[i] = keyed{e.key(), e}
	}
	slices.SortFunc(rows, func(a, b keyed) int { return strings.Compare(a.key, b.key) })

	ins := s.d.rebind(`INSERT INTO lineage_edges (edge_key, input_namespace, input_name, output_namespace, output_name,
			job_namespace, job_name, producer, first_seen, last_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (edge_key) DO NOTHING`)
	// CASE rather than min/max or LEAST/GREATEST, which the two engines
	// spell differently; both compare their timestamps in time order
	// (SQLite's fixed-width UTC text sorts as time).
	upd := s.d.rebind(`UPDATE lineage_edges SET
			producer   = CASE WHEN ? >= last_seen THEN ? ELSE producer END,
			first_seen = CASE WHEN ? < first_seen THEN ? ELSE first_seen END,
			last_seen  = CASE WHEN ? > last_seen THEN ? ELSE last_seen END
		WHERE edge_key = ?`)
	err = s.Update(ctx, func(tx *Tx) error {
		added = 0
		made, err := lineageMade(ctx, tx.tx, s.d, tx.key)
		if err != nil {
			return err
		}
		var named []LineageEdge
		for _, r := range rows {
			first, last := s.d.timestamp(r.FirstSeen), s.d.timestamp(r.LastSeen)
			res, err := tx.tx.ExecContext(ctx, ins, r.key, r.Input.Namespace, r.Input.Name, r.Output.Namespace, r.Output.Name,
				r.Job.Namespace, r.Job.Name, r.Producer, first, last)
			if err != nil {
				return fmt.Errorf("record lineage: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("record lineage: %w", err)
			} else if n > 0 {
				added++
				named = append(named, r.LineageEdge)
				continue
			}
			if _, err := tx.tx.ExecContext(ctx, upd, last, r.Producer, first, first, last, last, r.key); err != nil {
				return fmt.Errorf("record lineage: %w", err)
			}
			if !made[r.key] {
				named = append(named, r.LineageEdge)
			}
		}
		if len(named) == 0 {
			return nil
		}
		list := make([]lineageClaim, len(named))
		for i, e := range named {
			list[i] = lineageClaim{Input: e.Input, Output: e.Output, Job: e.Job}
		}
		actor := rep.Actor
		if actor == "" {
			actor = "openlineage"
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventLineage, Actor: actor, At: tx.clock(),
			Detail: refill.Detail(map[string]any{"job": rep.Job, "producer": rep.Producer, "run": rep.Run, "new_edges": added, "edges": list})})
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// lineageClaim is an edge as its audit entry names it.
type lineageClaim struct {
	Input  refill.OpenLineageName `json:"input"`
	Output refill.OpenLineageName `json:"output"`
	Job    refill.OpenLineageName `json:"job"`
}

// lineageRows are lineage_edges: an edge counts with the entry that named
// it. Entries written before they named each edge listed them as text
// ("ns/name -> ns/name", at most 50): those make the rows they list.
var lineageRows = &rowKind{table: "lineage_edges", kinds: []refill.EventKind{refill.EventLineage},
	claims: func(e *refill.Event) []claim {
		var d struct {
			Edges []json.RawMessage `json:"edges"`
		}
		if json.Unmarshal(e.Detail, &d) != nil {
			return nil
		}
		var out []claim
		for _, raw := range d.Edges {
			var c lineageClaim
			var legacy string
			switch {
			case json.Unmarshal(raw, &c) == nil:
				out = append(out, claim{key: LineageEdge{Input: c.Input, Output: c.Output, Job: c.Job}.key()})
			case json.Unmarshal(raw, &legacy) == nil:
				out = append(out, claim{key: "legacy\x1f" + legacy, shared: true})
			}
		}
		return out
	}}

func (e LineageEdge) ledger() ledgerRow {
	return ledgerRow{id: e.key()[:12], key: e.key(),
		legacy: "legacy\x1f" + e.Input.Namespace + "/" + e.Input.Name + " -> " + e.Output.Namespace + "/" + e.Output.Name,
		what:   fmt.Sprintf("the lineage edge %s/%s -> %s/%s", e.Input.Namespace, e.Input.Name, e.Output.Namespace, e.Output.Name)}
}

// lineageMade returns the keys of the edges an audit entry named.
func lineageMade(ctx context.Context, q querier, d dialect, akey []byte) (map[string]bool, error) {
	evs, err := entriesOf(ctx, q, d, akey, lineageRows.kinds, "", "")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i := range evs {
		for _, c := range lineageRows.claims(&evs[i]) {
			if !c.shared {
				out[c.key] = true
			}
		}
	}
	return out, nil
}

// LineageEdges returns every recorded edge that counts, ordered by input,
// output and job: those an audit entry named, and those an entry named
// whose row is gone (they still raise a plan's tier: the log decides). A
// plan matches them against its datasets in memory: the match compares
// names as refill.yaml writes tables (openlineage.Matcher), which SQL over
// these columns could only approximate.
func (s *Store) LineageEdges(ctx context.Context) ([]LineageEdge, error) {
	all, err := lineageRowsOf(ctx, s.db)
	if err != nil {
		return nil, err
	}
	evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), lineageRows.kinds, "", "")
	if err != nil {
		return nil, err
	}
	lrows := make([]ledgerRow, len(all))
	for i, e := range all {
		lrows[i] = e.ledger()
	}
	verdicts, _ := lineageRows.settle(lrows, evs)
	var out []LineageEdge
	have := map[string]bool{}
	for i, e := range all {
		have[e.key()] = true
		if verdicts[i].counts {
			out = append(out, e)
		}
	}
	for i := range evs {
		var d struct {
			Producer string            `json:"producer"`
			Edges    []json.RawMessage `json:"edges"`
		}
		_ = json.Unmarshal(evs[i].Detail, &d)
		for _, raw := range d.Edges {
			var c lineageClaim
			if json.Unmarshal(raw, &c) != nil {
				continue
			}
			e := LineageEdge{Input: c.Input, Output: c.Output, Job: c.Job, Producer: d.Producer, FirstSeen: evs[i].At, LastSeen: evs[i].At}
			if !have[e.key()] {
				have[e.key()] = true
				out = append(out, e)
			}
		}
	}
	// Sorted here, not by ORDER BY: the engines collate text differently.
	slices.SortFunc(out, func(a, b LineageEdge) int {
		return cmp.Or(compareName(a.Input, b.Input), compareName(a.Output, b.Output), compareName(a.Job, b.Job))
	})
	return out, nil
}

func lineageRowsOf(ctx context.Context, q querier) ([]LineageEdge, error) {
	rows, err := q.QueryContext(ctx, `SELECT input_namespace, input_name, output_namespace, output_name,
		job_namespace, job_name, producer, first_seen, last_seen FROM lineage_edges`)
	if err != nil {
		return nil, fmt.Errorf("lineage edges: %w", err)
	}
	defer rows.Close()
	var out []LineageEdge
	for rows.Next() {
		var e LineageEdge
		var first, last timestamp
		if err := rows.Scan(&e.Input.Namespace, &e.Input.Name, &e.Output.Namespace, &e.Output.Name,
			&e.Job.Namespace, &e.Job.Name, &e.Producer, &first, &last); err != nil {
			return nil, fmt.Errorf("lineage edges: %w", err)
		}
		e.FirstSeen, e.LastSeen = first.Time, last.Time
		out = append(out, e)
	}
	return out, rows.Err()
}

func compareName(a, b refill.OpenLineageName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}
