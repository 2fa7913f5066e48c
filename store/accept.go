package store

import (
	"context"
	"fmt"

	"github.com/refill-dev/refill"
)

// Accept records an acceptance; the caller appends its audit entry in the
// same transaction. The same finding accepted at the same measurement
// before (two people at once, say) is refused with ErrBadInput, so one
// acceptance and one audit entry are recorded.
func (t *Tx) Accept(ctx context.Context, a refill.Acceptance) error {
	if err := t.settleAcceptances(ctx, a); err != nil {
		return err
	}
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

// Revoke withdraws every acceptance in force of one finding and returns
// how many it withdrew; the caller appends the audit entry in the same
// transaction.
func (t *Tx) Revoke(ctx context.Context, a refill.Acceptance, r refill.Accepted) (int64, error) {
	if err := t.settleAcceptances(ctx, a); err != nil {
		return 0, err
	}
	res, err := t.tx.ExecContext(ctx, t.d.rebind(`UPDATE acceptances SET revoked_by = ?, revoked_reason = ?, revoked_at = ?
		WHERE dataset = ? AND partition = ? AND check_name = ? AND column_name = ? AND revoked_at IS NULL`),
		r.By, r.Reason, t.d.timestamp(r.At), a.Dataset, a.Partition, a.Check, a.Column)
	if err != nil {
		return 0, fmt.Errorf("revoke acceptance of %s %s %s: %w", a.Dataset, a.Partition, a.Check, err)
	}
	return res.RowsAffected()
}
