package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/refill-dev/refill"
)

// Accept records an acceptance; the caller appends its audit entry in the
// same transaction. The same finding accepted at the same measurement
// before (two people at once, say) is refused with ErrBadInput, so one
// acceptance and one audit entry are recorded.
func (t *Tx) Accept(ctx context.Context, a refill.Acceptance) error {
	res, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO acceptances (dataset, partition, check_name, column_name, measured, accepted_by, reason, accepted_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, partition, check_name, column_name, measured) WHERE revoked_at IS NULL DO NOTHING`),
		a.Dataset, a.Partition, a.Check, a.Column, a.Measured, a.By, a.Reason, t.d.timestamp(a.At))
	if err != nil {
		return fmt.Errorf("accept %s %s %s: %w", a.Dataset, a.Partition, a.Check, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return refill.BadInputf("%s %s %s is already accepted at this measurement (%s)", a.Dataset, a.Partition, a.Check, a.Measured)
	}
	return nil
}

// Acceptances lists a dataset's acceptances, oldest first; with partition
// set, only that partition's. The newest for a (partition, check, column)
// is the one in force.
func (s *Store) Acceptances(ctx context.Context, dataset, partition string) ([]refill.Acceptance, error) {
	q := `SELECT dataset, partition, check_name, column_name, measured, accepted_by, reason, accepted_at, revoked_by, revoked_reason, revoked_at FROM acceptances WHERE dataset = ?`
	args := []any{dataset}
	if partition != "" {
		q += ` AND partition = ?`
		args = append(args, partition)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("acceptances of %s: %w", dataset, err)
	}
	defer rows.Close()
	out := []refill.Acceptance{}
	for rows.Next() {
		var a refill.Acceptance
		var at timestamp
		var rby, rreason sql.NullString
		var rat sql.Null[timestamp]
		if err := rows.Scan(&a.Dataset, &a.Partition, &a.Check, &a.Column, &a.Measured, &a.By, &a.Reason, &at, &rby, &rreason, &rat); err != nil {
			return nil, fmt.Errorf("acceptances of %s: %w", dataset, err)
		}
		a.At = at.Time
		if rat.Valid {
			a.Revoked = &refill.Accepted{By: rby.String, Reason: rreason.String, At: rat.V.Time}
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Revoke withdraws every acceptance in force of one finding and returns
// how many it withdrew; the caller appends the audit entry in the same
// transaction.
func (t *Tx) Revoke(ctx context.Context, a refill.Acceptance, r refill.Accepted) (int64, error) {
	res, err := t.tx.ExecContext(ctx, t.d.rebind(`UPDATE acceptances SET revoked_by = ?, revoked_reason = ?, revoked_at = ?
		WHERE dataset = ? AND partition = ? AND check_name = ? AND column_name = ? AND revoked_at IS NULL`),
		r.By, r.Reason, t.d.timestamp(r.At), a.Dataset, a.Partition, a.Check, a.Column)
	if err != nil {
		return 0, fmt.Errorf("revoke acceptance of %s %s %s: %w", a.Dataset, a.Partition, a.Check, err)
	}
	return res.RowsAffected()
}
