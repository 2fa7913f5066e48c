package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/refill-dev/refill"
)

// SaveProof records a proof's evidence. Proofs are only ever added: the
// history of what was proven, by whom and against which job definition is
// itself evidence.
func (s *Store) SaveProof(ctx context.Context, p *refill.Proof) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.SaveProof(ctx, p) })
}

func saveProof(ctx context.Context, q querier, d dialect, p *refill.Proof) error {
	if p.Dataset == "" || p.Fingerprint == "" {
		return fmt.Errorf("save proof: dataset and fingerprint are required")
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("save proof of %s: %w", p.Dataset, err)
	}
	_, err = q.ExecContext(ctx, d.rebind(`
		INSERT INTO proofs (dataset, partition, fingerprint, passed, proven_at, proven_by, body)
		VALUES (?, ?, ?, ?, ?, ?, ?)`),
		p.Dataset, p.Partition, p.Fingerprint, d.boolean(p.Passed), d.timestamp(p.ProvenAt), p.ProvenBy, string(body))
	if err != nil {
		return fmt.Errorf("save proof of %s: %w", p.Dataset, err)
	}
	return nil
}

// Proofs returns a dataset's proofs, newest first.
func (s *Store) Proofs(ctx context.Context, dataset string) ([]refill.Proof, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT body FROM proofs WHERE dataset = ? ORDER BY seq DESC`), dataset)
	if err != nil {
		return nil, fmt.Errorf("proofs of %s: %w", dataset, err)
	}
	defer rows.Close()
	out := []refill.Proof{}
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("proofs of %s: %w", dataset, err)
		}
		var p refill.Proof
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			return nil, verificationf("a proof of %s in the state store is not readable: %v", dataset, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SaveFlags records partitions the gate found bad, in one transaction.
func (s *Store) SaveFlags(ctx context.Context, flags []refill.Flag) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.SaveFlags(ctx, flags) })
}

// Flagged returns every partition of dataset the gate ever flagged.
func (s *Store) Flagged(ctx context.Context, dataset string) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT DISTINCT partition FROM gate_flags WHERE dataset = ?`), dataset)
	if err != nil {
		return nil, fmt.Errorf("gate flags of %s: %w", dataset, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("gate flags of %s: %w", dataset, err)
		}
		out[p] = true
	}
	return out, rows.Err()
}
