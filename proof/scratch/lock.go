package scratch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/refill-dev/refill"
)

// lock makes proofs on one proof warehouse take turns: each empties,
// spoils and checksums the same partitions there, so two at once (two
// people proving through the server, or the CLI beside it) would judge
// each other's rows. A SQLite proof warehouse is locked by a lock file
// beside it (flock, so a process that dies releases it); a PostgreSQL one
// by a session advisory lock, which holds across hosts. Waiting ends with
// ctx.
func lock(ctx context.Context, wh refill.Warehouse, sqlitePath string) (unlock func(), err error) {
	if sqlitePath != "" {
		file, _, _ := strings.Cut(sqlitePath, "?")
		return lockFile(ctx, file+".refill-proof.lock")
	}
	dbr, ok := wh.(interface{ DB() *sql.DB })
	if !ok {
		return func() {}, nil
	}
	conn, err := dbr.DB().Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("proof_warehouse: locking it for this proof: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("refill proof_warehouse"))
	key := int64(h.Sum64() >> 1)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Close()
		return nil, waited(ctx, err)
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
		conn.Close()
	}, nil
}

func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proof_warehouse: locking it for this proof: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("proof_warehouse: locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, waited(ctx, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waited(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return refill.Lockedf("another proof is using proof_warehouse; gave up waiting for it: %v", ctx.Err())
	}
	return fmt.Errorf("proof_warehouse: locking it for this proof: %w", err)
}
