package scratch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
)

// TestProofsTakeTurnsOnTheProofWarehouse: while one proof holds the proof
// warehouse, another waits — and gives up, locked, when its context ends —
// then goes once the first closes. On SQLite by a lock file, on PostgreSQL
// by an advisory lock.
func TestProofsTakeTurnsOnTheProofWarehouse(t *testing.T) {
	for name, proofWH := range map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "proof.db")
			if err := os.WriteFile(path, nil, 0o644); err != nil { // an empty file is an empty database
				t.Fatal(err)
			}
			return "sqlite:" + path
		},
		"postgres": func(t *testing.T) string { return pgtest.Schema(t) },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := &refill.Config{ProofWarehouse: proofWH(t), Dir: t.TempDir()}
			first, err := Open(t.Context(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if w, err := Open(ctx, cfg, nil); err == nil {
				w.Close()
				t.Fatal("a second proof opened the proof warehouse while the first held it")
			} else if !errors.Is(err, refill.ErrLocked) {
				t.Fatalf("a second proof that gave up waiting: %v, want it locked", err)
			}
			got := make(chan error, 1)
			go func() {
				w, err := Open(t.Context(), cfg, nil)
				if err == nil {
					err = w.Close()
				}
				got <- err
			}()
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("the proof waiting its turn: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the proof waiting its turn never went after the first closed")
			}
		})
	}
}
