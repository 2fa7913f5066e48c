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

// Proofs returns a dataset's proofs, newest first: only those the audit log
// records (same partition, job fingerprint, verdict and prover). A proof
// decides whether a plan may run on its own, so, like an approval, a row
// written or altered behind refill's back counts for nothing.
func (s *Store) Proofs(ctx context.Context, dataset string) ([]refill.Proof, error) {
	all, err := s.proofRows(ctx, dataset)
	if err != nil {
		return nil, err
	}
	evs, err := s.Audit(ctx, AuditFilter{Kind: refill.EventProof, Dataset: dataset})
	if err != nil {
		return nil, err
	}
	type key struct {
		partition, fingerprint, actor string
		passed                        bool
	}
	audited := map[key]int{}
	for _, e := range evs {
		var d struct {
			Passed      bool   `json:"passed"`
			Fingerprint string `json:"fingerprint"`
		}
		if json.Unmarshal(e.Detail, &d) == nil {
			audited[key{e.Partition, d.Fingerprint, e.Actor, d.Passed}]++
		}
	}
	out := []refill.Proof{}
	for _, p := range all {
		k := key{p.Partition, p.Fingerprint, p.ProvenBy, p.Passed}
		if audited[k] == 0 {
			continue
		}
		audited[k]--
		out = append(out, p)
	}
	return out, nil
}

func (s *Store) proofRows(ctx context.Context, dataset string) ([]refill.Proof, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT body, passed FROM proofs WHERE dataset = ? ORDER BY seq DESC`), dataset)
	if err != nil {
		return nil, fmt.Errorf("proofs of %s: %w", dataset, err)
	}
	defer rows.Close()
	out := []refill.Proof{}
	for rows.Next() {
		var body string
		var passed bool
		if err := rows.Scan(&body, &passed); err != nil {
			return nil, fmt.Errorf("proofs of %s: %w", dataset, err)
		}
		var p refill.Proof
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			return nil, verificationf("a proof of %s in the state store is not readable: %v", dataset, err)
		}
		if p.Passed != passed {
			continue // the row and its body disagree: altered behind refill's back
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
