package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Slot is one partition job running now: taken before it builds, renewed
// while it runs, given back after (table run_slots).
type Slot struct {
	Dataset string
	// Key is the partition the job builds: one job at a time holds it.
	Key string
	// Holder is the job; Process the host:pid running it.
	Holder, Process string
}

// deadSlotsKept is how long TakeSlot keeps the slot of a job that died.
const deadSlotsKept = 24 * time.Hour

// WaiterKept is how long a partition keeps its place among its dataset's
// waiters (table slot_waiters) after it last asked for a slot: longer than
// a job is snoozed and fetched again, short enough that a job that stopped
// asking (its plan ended, its worker stopped) holds nobody back for long.
const WaiterKept = 10 * time.Second

// TakeSlot takes sl until until, unless the dataset already has limit live
// slots held by other jobs, or another job holds sl.Key, or partitions
// that began to wait before sl's still wait for the free ones: then it
// takes nothing, keeps sl's partition's place among the waiters (or gives
// it one) and returns false. A slot is live while its alive_until is to
// come and its process may still run (Lease.HolderAlive); dead ones count
// for nothing and are cleared a day after they died. Taking a slot it
// already holds renews it.
func (s *Store) TakeSlot(ctx context.Context, sl Slot, limit int, now, until time.Time) (bool, error) {
	taken := false
	err := s.slotTx(ctx, sl.Dataset, func(tx *Tx) error {
		taken = false
		rows, err := tx.tx.QueryContext(ctx, tx.d.rebind(`SELECT key, holder, process, alive_until FROM run_slots WHERE dataset = ?`), sl.Dataset)
		if err != nil {
			return err
		}
		var dead []string
		busy, live, own := false, 0, false
		for rows.Next() {
			var key, holder, process string
			var alive timestamp
			if err := rows.Scan(&key, &holder, &process, &alive); err != nil {
				rows.Close()
				return err
			}
			if holder == sl.Holder {
				own = true
				continue
			}
			if !(Lease{Holder: process, Expires: alive.Time}).Alive(now) {
				// A dead slot counts for nothing; it stays to tell that
				// its job was lost (SlotOf) until the partition is taken
				// again, or for a day.
				if alive.Time.Before(now.Add(-deadSlotsKept)) {
					dead = append(dead, key)
				}
				continue
			}
			live++
			busy = busy || key == sl.Key
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		// A free slot goes to the partitions that waited longest, in any
		// process: this one takes one only if fewer live waiters are ahead
		// of it than slots are free. Otherwise it keeps (or takes) its
		// place, renewed while it asks.
		var ahead int
		var mine *time.Time
		if !own {
			if ahead, mine, err = tx.slotWaitersAhead(ctx, sl, now); err != nil {
				return err
			}
		}
		if busy || live+ahead >= limit {
			if busy {
				return nil
			}
			since := now
			if mine != nil {
				since = *mine
			}
			_, err := tx.tx.ExecContext(ctx, tx.d.rebind(`INSERT INTO slot_waiters (dataset, key, process, since, alive_until) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (dataset, key) DO UPDATE SET process = excluded.process, alive_until = excluded.alive_until`),
				sl.Dataset, sl.Key, sl.Process, tx.d.timestamp(since), tx.d.timestamp(now.Add(WaiterKept)))
			return err
		}
		if mine != nil {
			if _, err := tx.tx.ExecContext(ctx, tx.d.rebind(`DELETE FROM slot_waiters WHERE dataset = ? AND key = ?`), sl.Dataset, sl.Key); err != nil {
				return err
			}
		}
		for _, key := range dead {
			if _, err := tx.tx.ExecContext(ctx, tx.d.rebind(`DELETE FROM run_slots WHERE dataset = ? AND key = ?`), sl.Dataset, key); err != nil {
				return err
			}
		}
		if _, err := tx.tx.ExecContext(ctx, tx.d.rebind(`INSERT INTO run_slots (dataset, key, holder, process, alive_until) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (dataset, key) DO UPDATE SET holder = excluded.holder, process = excluded.process, alive_until = excluded.alive_until`),
			sl.Dataset, sl.Key, sl.Holder, sl.Process, tx.d.timestamp(until)); err != nil {
			return err
		}
		taken = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%s %s: take a slot: %w", sl.Dataset, sl.Key, err)
	}
	return taken, nil
}

// slotWaitersAhead counts the live waiters of sl's dataset that began to
// wait before sl's partition (ties go by key), and returns when sl's began
// (nil: it is not waiting). Waiters that stopped asking are cleared.
func (tx *Tx) slotWaitersAhead(ctx context.Context, sl Slot, now time.Time) (ahead int, mine *time.Time, err error) {
	rows, err := tx.tx.QueryContext(ctx, tx.d.rebind(`SELECT key, process, since, alive_until FROM slot_waiters WHERE dataset = ?`), sl.Dataset)
	if err != nil {
		return 0, nil, err
	}
	type waiter struct {
		key   string
		since time.Time
	}
	var others []waiter
	var gone []string
	var ownOldest *time.Time
	for rows.Next() {
		var key, process string
		var since, alive timestamp
		if err := rows.Scan(&key, &process, &since, &alive); err != nil {
			rows.Close()
			return 0, nil, err
		}
		switch {
		case key == sl.Key:
			t := since.Time
			mine = &t
		case !(Lease{Holder: process, Expires: alive.Time}).Alive(now):
			gone = append(gone, key)
		case process == sl.Process:
			// Its own process's waiters take turns in the process first
			// (the one asking holds the turn), so they are not ahead of
			// it: it asks in their place, from the oldest's time.
			if ownOldest == nil || since.Time.Before(*ownOldest) {
				t := since.Time
				ownOldest = &t
			}
		default:
			others = append(others, waiter{key, since.Time})
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, nil, err
	}
	rows.Close()
	since := now
	if mine != nil {
		since = *mine
	}
	if ownOldest != nil && ownOldest.Before(since) {
		since = *ownOldest
	}
	for _, w := range others {
		if w.since.Before(since) || (w.since.Equal(since) && w.key < sl.Key) {
			ahead++
		}
	}
	for _, key := range gone {
		if _, err := tx.tx.ExecContext(ctx, tx.d.rebind(`DELETE FROM slot_waiters WHERE dataset = ? AND key = ?`), sl.Dataset, key); err != nil {
			return 0, nil, err
		}
	}
	return ahead, mine, nil
}

// LeaveSlotQueue gives up the place of dataset's partition key among the
// slot's waiters: its job stopped waiting for good (cancelled, or its
// process shutting down).
func (s *Store) LeaveSlotQueue(ctx context.Context, dataset, key string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM slot_waiters WHERE dataset = ? AND key = ?`), dataset, key); err != nil {
		return fmt.Errorf("%s %s: leave the slot's queue: %w", dataset, key, err)
	}
	return nil
}

// RenewSlot keeps sl live until until, while its job runs. It reports
// false when sl is no longer its holder's (it lapsed and another job took
// the partition).
func (s *Store) RenewSlot(ctx context.Context, sl Slot, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE run_slots SET alive_until = ? WHERE dataset = ? AND key = ? AND holder = ?`),
		s.d.timestamp(until), sl.Dataset, sl.Key, sl.Holder)
	if err != nil {
		return false, fmt.Errorf("%s %s: renew its slot: %w", sl.Dataset, sl.Key, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ReleaseSlot gives sl back; it does nothing when sl is not its holder's.
func (s *Store) ReleaseSlot(ctx context.Context, sl Slot) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM run_slots WHERE dataset = ? AND key = ? AND holder = ?`),
		sl.Dataset, sl.Key, sl.Holder); err != nil {
		return fmt.Errorf("%s %s: give its slot back: %w", sl.Dataset, sl.Key, err)
	}
	return nil
}

// SlotOf reports which process holds a slot for the partition key of
// dataset ("" when none does), and whether that slot is live at now.
func (s *Store) SlotOf(ctx context.Context, dataset, key string, now time.Time) (process string, live bool, err error) {
	var alive timestamp
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT process, alive_until FROM run_slots WHERE dataset = ? AND key = ?`), dataset, key).Scan(&process, &alive)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s %s: read its slot: %w", dataset, key, err)
	}
	return process, Lease{Holder: process, Expires: alive.Time}.Alive(now), nil
}

// slotTx runs fn in a transaction that holds dataset's slot lock: not the
// audit chain's (Store.Update), which every publish record waits on. A
// slot writes no audit entry.
func (s *Store) slotTx(ctx context.Context, dataset string, fn func(tx *Tx) error) error {
	sqltx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	defer sqltx.Rollback() //nolint:errcheck // a no-op after Commit
	if s.d.lockSlots != "" {
		if _, err := sqltx.ExecContext(ctx, s.d.rebind(s.d.lockSlots), dataset); err != nil {
			return fmt.Errorf("state store: %w", err)
		}
	}
	if err := fn(&Tx{tx: sqltx, d: s.d, key: s.key, now: s.now}); err != nil {
		return err
	}
	if err := sqltx.Commit(); err != nil {
		return fmt.Errorf("state store: commit: %w", err)
	}
	return nil
}
