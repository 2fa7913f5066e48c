package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// RecordLineage records edges in one transaction and returns how many had
// not been recorded before. Recording an edge again changes only its
// window: first seen moves earlier, last seen later (and the producer
// follows the latest event). Since the window comes from the events' own
// times, repeating an event changes nothing at all.
//
// It takes no audit lock: lineage is reported by machines, often, and
// records what they saw rather than a decision anyone made.
func (s *Store) RecordLineage(ctx context.Context, edges []LineageEdge) (added int, err error) {
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

	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("record lineage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
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
	for _, r := range rows {
		first, last := s.d.timestamp(r.FirstSeen), s.d.timestamp(r.LastSeen)
		res, err := tx.ExecContext(ctx, ins, r.key, r.Input.Namespace, r.Input.Name, r.Output.Namespace, r.Output.Name,
			r.Job.Namespace, r.Job.Name, r.Producer, first, last)
		if err != nil {
			return 0, fmt.Errorf("record lineage: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, fmt.Errorf("record lineage: %w", err)
		} else if n > 0 {
			added++
			continue
		}
		if _, err := tx.ExecContext(ctx, upd, last, r.Producer, first, first, last, last, r.key); err != nil {
			return 0, fmt.Errorf("record lineage: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("record lineage: commit: %w", err)
	}
	return added, nil
}

// LineageEdges returns every recorded edge, ordered by input, output and
// job. A plan matches them against its datasets in memory: the match
// compares names as refill.yaml writes tables (openlineage.Matcher), which
// SQL over these columns could only approximate.
func (s *Store) LineageEdges(ctx context.Context) ([]LineageEdge, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT input_namespace, input_name, output_namespace, output_name,
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lineage edges: %w", err)
	}
	// Sorted here, not by ORDER BY: the engines collate text differently.
	slices.SortFunc(out, func(a, b LineageEdge) int {
		return cmp.Or(compareName(a.Input, b.Input), compareName(a.Output, b.Output), compareName(a.Job, b.Job))
	})
	return out, nil
}

func compareName(a, b refill.OpenLineageName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}
