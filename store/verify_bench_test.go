package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// BenchmarkVerifyBeforeWrite: the check every write starts with verifies
// the audit log from its checkpoint, so its cost stays flat as the log
// grows; `refill audit verify` walks all of it. Each iteration appends one
// entry and verifies, on a keyed SQLite log of 1,000 and 100,000 entries.
func BenchmarkVerifyBeforeWrite(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		s := filledLog(b, n)
		b.Run(fmt.Sprintf("from-checkpoint/entries=%d", n), func(b *testing.B) {
			for b.Loop() {
				appendOne(b, s)
				if _, err := s.VerifyAuditFrom(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("whole-log/entries=%d", n), func(b *testing.B) {
			for b.Loop() {
				appendOne(b, s)
				if _, err := s.VerifyAudit(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func filledLog(b *testing.B, n int) *store.Store {
	b.Helper()
	s, err := store.Open(b.Context(), "sqlite:"+filepath.Join(b.TempDir(), "state.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	s.SetAuditKey([]byte("benchmark key, never a real one"))
	const batch = 1000
	for done := 0; done < n; done += batch {
		err := s.Update(b.Context(), func(tx *store.Tx) error {
			for i := 0; i < batch && done+i < n; i++ {
				if err := tx.Append(b.Context(), event(done+i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.VerifyAuditFrom(b.Context()); err != nil { // the checkpoint
		b.Fatal(err)
	}
	return s
}

func appendOne(b *testing.B, s *store.Store) {
	if err := s.Update(context.Background(), func(tx *store.Tx) error { return tx.Append(b.Context(), event(0)) }); err != nil {
		b.Fatal(err)
	}
}

func event(i int) *refill.Event {
	return &refill.Event{Kind: refill.EventGateResult, Actor: "bench", Dataset: "events_raw",
		Partition: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i%365).Format("2006-01-02"), At: time.Now(),
		Detail: refill.Detail(map[string]any{"passed": true, "n": i})}
}
