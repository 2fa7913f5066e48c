// Package store is refill's own state: the plans it made and what happened
// to them, in SQLite for one engineer or PostgreSQL for a team (docs/design.md
// §8). It is refill's one state store: the same statements on both engines,
// their differences confined to a dialect (goose's pattern), and one
// conformance suite (store/storetest) over every operation.
//
// Both engines run the same statements through database/sql; what differs
// between them (placeholders, types, locks) is confined to a dialect, and
// each engine has its own embedded migrations, applied on Open.
//
// A plan is immutable once saved. Its body is stored with the hash it was
// saved under and checked against that hash on every load, so a plan edited
// behind refill's back (docs/design.md §10: an approval is bound to the hash) is
// refused rather than applied.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/refill-dev/refill/dsn"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/refill-dev/refill"
)

// Store is the state store. It is safe for concurrent use, and several
// processes may share one database: the only write that changes existing
// state, SetStatus, is a compare-and-set.
type Store struct {
	db   *sql.DB
	pool *pgxpool.Pool // nil on SQLite
	d    dialect
	path string // the SQLite file; "" on PostgreSQL
	key  []byte // the audit chain's key (SetAuditKey)
	// outbox hears every audit entry in its transaction (SetOutbox).
	outbox Outbox
	// now is the store's clock (WithClock): the real one unless a test
	// hands it another.
	now func() time.Time
}

// Option configures a store as it opens.
type Option func(*Store)

// WithClock gives the store a clock for what it stamps: audit entries,
// the times rows are recorded, and the leases it compares against. refill
// itself never passes one: those are the real clock's (REFILL_NOW moves no
// decision). Tests do, to make stamps exact.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// clock is the store's time now.
func (s *Store) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

// sqlitePragmas are applied to every SQLite connection. WAL lets readers
// run alongside the writer; busy_timeout makes a writer wait for another
// instead of failing at once with SQLITE_BUSY; foreign_keys is off by
// default in SQLite. _txlock=immediate takes the write lock when a
// transaction begins rather than at its first write, since a deferred
// transaction that must upgrade its lock fails without waiting.
const sqlitePragmas = dsn.SQLiteWAL + "&_pragma=foreign_keys(1)&_txlock=immediate"

// pgConnectTimeout bounds connecting to a PostgreSQL server when the URL
// does not say, so that a server that drops packets fails Open in seconds
// instead of hanging until the caller gives up.
const pgConnectTimeout = 10 * time.Second

// pgMaxConns bounds the state store's connections to PostgreSQL unless the
// DSN's pool_max_conns says otherwise.
const pgMaxConns = 16

// Open opens the state store named by dsn and brings its schema up to date.
//
// dsn is "sqlite:PATH" or a "postgres://" or "postgresql://" URL, as in
// refill.yaml's state: key. A relative PATH is taken from baseDir (the
// directory of refill.yaml), and missing parent directories are created, so
// that the default sqlite:.refill/state.db needs no set-up. A PostgreSQL
// store lives in the first schema of the URL's search_path.
func Open(ctx context.Context, dsn, baseDir string, opts ...Option) (*Store, error) {
	var s *Store
	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		s, err = openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"), baseDir)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s, err = openPostgres(ctx, dsn)
	default:
		// Only the scheme is echoed: the rest may hold a password.
		scheme, _, _ := strings.Cut(dsn, ":")
		return nil, refill.BadInputf("state store %q is not supported: want sqlite:PATH or postgres://HOST/DB", scheme+":…")
	}
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

func openSQLite(ctx context.Context, file, baseDir string) (*Store, error) {
	if file == "" {
		return nil, refill.BadInputf("state store sqlite: needs a path, for example sqlite:.refill/state.db")
	}
	// The driver splits its DSN at the first '?', so a path holding one would
	// silently open a different file.
	if strings.Contains(file, "?") {
		return nil, refill.BadInputf("state store sqlite:%s: the path may not contain '?'", file)
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(baseDir, file)
	}
	// The state says who asked for and approved what; nobody else on the
	// machine needs to read it.
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, fmt.Errorf("state store sqlite:%s: %w", file, err)
	}
	db, err := sql.Open("sqlite", file+"?"+sqlitePragmas)
	if err != nil {
		return nil, fmt.Errorf("state store sqlite:%s: %w", file, err)
	}
	s := &Store{db: db, d: sqliteDialect, path: file}
	err = awaitSQLite(ctx, db)
	if err == nil {
		err = s.start(ctx)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state store sqlite:%s: %w", file, err)
	}
	return s, nil
}

// awaitSQLite opens the first connection, retrying while SQLite reports the
// database busy. Turning a new file to WAL takes a lock that SQLite does not
// wait for under busy_timeout, so when two processes (or the stores of one
// test) open a fresh file at the same moment, one of them gets SQLITE_BUSY
// from the connection's pragmas. It retries for as long as busy_timeout
// would have waited.
func awaitSQLite(ctx context.Context, db *sql.DB) error {
	const sqliteBusy = 5 // SQLITE_BUSY; extended codes keep it in the low byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := db.PingContext(ctx)
		var serr *sqlite.Error
		if err == nil || !errors.As(err, &serr) || serr.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, redact(refill.BadInputf("state store: %v", err), dsn)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	// pgxpool's default (four connections on a small machine) starves a
	// server answering many clients at once; pool_max_conns in the DSN
	// still decides when given.
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = pgMaxConns
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redact(fmt.Errorf("state store %s: %w", where, err), dsn)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, redact(fmt.Errorf("state store: cannot reach %s (is the server up, and is state: in refill.yaml right?): %w", where, err), dsn)
	}
	s := &Store{db: stdlib.OpenDBFromPool(pool), pool: pool, d: postgresDialect}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, redact(fmt.Errorf("state store %s: %w", where, err), dsn)
	}
	return s, nil
}

// start checks the database answers and migrates it.
func (s *Store) start(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return err
	}
	return migrate(ctx, s.db, s.d)
}

// DB returns the database the store runs on, for components that keep their
// own tables beside refill's, such as River's SQLite driver.
func (s *Store) DB() *sql.DB { return s.db }

// Pool returns the PostgreSQL connection pool the store runs on, for
// components that want pgx itself, such as River's pgx driver. It is nil for
// a SQLite store.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Driver names the engine: "sqlite" or "postgres".
func (s *Store) Driver() string { return s.d.name }

// Rebind writes a statement's ? placeholders as the engine wants them, for
// tests that write the store's tables by hand.
func (s *Store) Rebind(query string) string { return s.d.rebind(query) }

// Close releases the database. On PostgreSQL it closes the pool too, which
// database/sql does not own.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	return err
}

// SavePlan stores a new plan with its current status. It refuses a plan
// whose hash does not match its content, since every later load is checked
// against that hash, and an ID already saved, since a saved plan never
// changes: anything that would change a plan makes a new one.
func (s *Store) SavePlan(ctx context.Context, p *refill.Plan) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.SavePlan(ctx, p) })
}

// querier is what a statement runs on: the database, or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func savePlan(ctx context.Context, q querier, d dialect, p *refill.Plan) error {
	if p.ID == "" {
		return errors.New("save plan: the plan has no ID")
	}
	if p.Status == "" {
		return fmt.Errorf("save plan %s: the plan has no status", p.ID)
	}
	if sum := p.ComputeHash(); p.Hash != sum {
		return verificationf("save plan %s: its hash %s does not match its content (%s); a plan cannot change after it is hashed", p.ID, p.Hash, sum)
	}
	// The body leaves status out: it is the only part of a plan that moves,
	// so it lives in its own column, and a frozen copy in the body would
	// only be stale.
	frozen := *p
	frozen.Status = ""
	body, err := json.Marshal(&frozen)
	if err != nil {
		return fmt.Errorf("save plan %s: %w", p.ID, err)
	}
	targets, err := json.Marshal(p.Request.Targets)
	if err != nil {
		return fmt.Errorf("save plan %s: %w", p.ID, err)
	}
	selection, err := selectionKey(p.Request)
	if err != nil {
		return fmt.Errorf("save plan %s: %w", p.ID, err)
	}
	partitions := 0
	for _, st := range p.Steps {
		partitions += len(st.Partitions)
	}
	// ON CONFLICT DO NOTHING reports a duplicate as zero rows on both
	// engines, without parsing driver-specific constraint errors.
	res, err := q.ExecContext(ctx, d.rebind(`
		INSERT INTO plans (id, hash, status, tier, created_at, requested_by, targets,
			range_from, range_to, reason, datasets, partitions, body, selection)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`),
		p.ID, p.Hash, string(p.Status), string(p.Tier), d.timestamp(p.CreatedAt), p.Request.RequestedBy, string(targets),
		p.Request.From, p.Request.To, p.Request.Reason, len(p.Steps), partitions, string(body), selection)
	if err != nil {
		return fmt.Errorf("save plan %s: %w", p.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("save plan %s: %w", p.ID, err)
	} else if n == 0 {
		return refill.NotPermittedf("plan %s already exists; a saved plan never changes, so make a new plan instead", p.ID)
	}
	// The partitions it rewrites, for locks and history.
	ins := d.rebind(`INSERT INTO plan_partitions (plan_id, dataset, partition) VALUES (?, ?, ?)`)
	for _, st := range p.Steps {
		for _, pp := range st.Partitions {
			if _, err := q.ExecContext(ctx, ins, p.ID, st.Dataset, pp.Partition); err != nil {
				return fmt.Errorf("save plan %s: %w", p.ID, err)
			}
		}
	}
	return nil
}

// Plan loads a plan and proves it is the plan that was saved: its content
// must still hash to the stored hash, and its body must be the one saved
// under this ID. Either failure wraps refill.ErrVerification, because an
// approval bound to the hash must not carry over to different content.
func (s *Store) Plan(ctx context.Context, id string) (*refill.Plan, error) {
	var hash, status, body string
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT hash, status, body FROM plans WHERE id = ?`), id).
		Scan(&hash, &status, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, refill.NotFoundf("no plan %q in the state store; `refill plans` lists the plans there are", id)
	}
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", id, err)
	}
	p, err := decodePlan(id, hash, status, body)
	if err != nil {
		return nil, err
	}
	if err := s.planMade(ctx, []*refill.Plan{p}); err != nil {
		return nil, err
	}
	return p, nil
}

// planMade checks each plan against the audit entry that recorded it
// (plan_created, with the plan's hash, keyed): a plan's row is a decision
// like any other (ledger.go), so a body rewritten and rehashed in the
// state store — another tier, another range — is refused, whatever its
// own hash says.
func (s *Store) planMade(ctx context.Context, plans []*refill.Plan) error {
	for _, p := range plans {
		evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), []refill.EventKind{refill.EventPlanCreated}, p.ID, "")
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return verificationf("plan %s has no audit entry that recorded it: it was written into the state store behind refill's back; do not apply it, make a new plan", p.ID)
		}
		if made := str(detailOf(&evs[0]), "hash"); made != p.Hash {
			return verificationf("plan %s was altered in the state store: its audit entry recorded hash %s, the plan now hashes to %s (another tier, range or job); do not apply it, make a new plan", p.ID, made, p.Hash)
		}
	}
	return nil
}

// decodePlan reads a stored plan's body and checks it is the plan stored
// under id and hash.
func decodePlan(id, hash, status, body string) (*refill.Plan, error) {
	var p refill.Plan
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return nil, verificationf("plan %s was altered in the state store: its body is not a plan (%v); do not apply it, make a new plan", id, err)
	}
	if p.ID != id {
		return nil, verificationf("plan %s was altered in the state store: it holds the body of plan %q; do not apply it, make a new plan", id, p.ID)
	}
	if sum := p.ComputeHash(); sum != hash || p.Hash != hash {
		return nil, verificationf("plan %s was altered in the state store: stored hash %s, content hash %s; do not apply it, make a new plan", id, hash, sum)
	}
	p.Status = refill.Status(status)
	return &p, nil
}

// PlansByID loads several plans in one query, each checked as Plan checks
// it, in the order of ids. An id with no plan is refill.ErrNotFound.
func (s *Store) PlansByID(ctx context.Context, ids []string) ([]*refill.Plan, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT id, hash, status, body FROM plans WHERE id IN (`+placeholders(len(ids))+`)`), args...)
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	defer rows.Close()
	byID := map[string]*refill.Plan{}
	for rows.Next() {
		var id, hash, status, body string
		if err := rows.Scan(&id, &hash, &status, &body); err != nil {
			return nil, fmt.Errorf("plans: %w", err)
		}
		p, err := decodePlan(id, hash, status, body)
		if err != nil {
			return nil, err
		}
		byID[id] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	out := make([]*refill.Plan, len(ids))
	for i, id := range ids {
		if out[i] = byID[id]; out[i] == nil {
			return nil, refill.NotFoundf("no plan %q in the state store", id)
		}
	}
	if err := s.planMade(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// placeholders is "?, ?, …" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Plans lists plans newest first; plans made in the same instant (as under
// a fixed REFILL_NOW) are ordered by when they were saved. Each reason is
// clipped (refill.ClipText), in the query, so a list costs what its page
// shows however long the reasons stored.
func (s *Store) Plans(ctx context.Context, f refill.PlanFilter) ([]refill.PlanSummary, error) {
	q := `SELECT id, hash, status, tier, targets, range_from, range_to, requested_by,
		substr(reason, 1, ` + strconv.Itoa(refill.MaxText+1) + `), created_at, datasets, partitions FROM plans`
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Before != "" {
		var n int
		if err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT count(*) FROM plans WHERE id = ?`), f.Before).Scan(&n); err != nil {
			return nil, fmt.Errorf("list plans: %w", err)
		}
		if n == 0 {
			return nil, refill.BadInputf("before %q: no such plan; page on from the last plan of the page before", f.Before)
		}
		where = append(where, `(created_at, seq) < (SELECT created_at, seq FROM plans WHERE id = ?)`)
		args = append(args, f.Before)
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, seq DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	defer rows.Close()
	out := []refill.PlanSummary{}
	for rows.Next() {
		var (
			ps      refill.PlanSummary
			targets string
			created timestamp
		)
		if err := rows.Scan(&ps.ID, &ps.Hash, &ps.Status, &ps.Tier, &targets, &ps.From, &ps.To,
			&ps.RequestedBy, &ps.Reason, &created, &ps.Datasets, &ps.Partitions); err != nil {
			return nil, fmt.Errorf("list plans: %w", err)
		}
		if err := json.Unmarshal([]byte(targets), &ps.Targets); err != nil {
			return nil, fmt.Errorf("list plans: plan %s: targets: %w", ps.ID, err)
		}
		ps.CreatedAt = created.Format(time.RFC3339Nano)
		ps.Reason = refill.ClipText(ps.Reason)
		out = append(out, ps)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return out, nil
}

// SetStatus moves a plan from one status to another as a compare-and-set,
// so that of two approvers, or a runner and a canceller, racing on one plan
// exactly one wins. Whether the move itself is allowed is the caller's
// decision, not the store's.
func (s *Store) SetStatus(ctx context.Context, id string, from, to refill.Status) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.SetStatus(ctx, id, from, to) })
}

func setStatus(ctx context.Context, q querier, d dialect, id string, from, to refill.Status) error {
	if !from.CanBecome(to) {
		return refill.NotPermittedf("plan %s: a %s plan cannot become %s", id, from, to)
	}
	res, err := q.ExecContext(ctx, d.rebind(`UPDATE plans SET status = ? WHERE id = ? AND status = ?`),
		string(to), id, string(from))
	if err != nil {
		return fmt.Errorf("plan %s: set status %s: %w", id, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("plan %s: set status %s: %w", id, to, err)
	}
	if n > 0 {
		return nil
	}
	var cur string
	err = q.QueryRowContext(ctx, d.rebind(`SELECT status FROM plans WHERE id = ?`), id).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return refill.NotFoundf("no plan %q in the state store; `refill plans` lists the plans there are", id)
	case err != nil:
		return fmt.Errorf("plan %s: set status %s: %w", id, to, err)
	case refill.Status(cur) == from:
		// It moved away and back between the update and this read.
		return refill.NotPermittedf("plan %s changed status while it was being set to %s; look at it again", id, to)
	}
	return refill.NotPermittedf("plan %s is %s, not %s, so it cannot become %s", id, cur, from, to)
}

// SaveSchemas records sources' columns as a plan saw them, all or none.
// Snapshots are only ever added, so the history of a source's schema stays
// readable.
func (s *Store) SaveSchemas(ctx context.Context, snaps []refill.SchemaSnapshot) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.SaveSchemas(ctx, snaps) })
}

// LatestSchema returns the columns of dataset recorded last. Insertion order
// decides, not the clock, so two plans made within one clock tick still
// compare against the right one.
func (s *Store) LatestSchema(ctx context.Context, dataset string) (refill.SchemaSnapshot, bool, error) {
	snap := refill.SchemaSnapshot{Dataset: dataset}
	var cols string
	err := s.db.QueryRowContext(ctx, s.d.rebind(`
		SELECT plan_id, columns FROM schema_snapshots WHERE dataset = ? ORDER BY id DESC LIMIT 1`), dataset).
		Scan(&snap.PlanID, &cols)
	if errors.Is(err, sql.ErrNoRows) {
		return refill.SchemaSnapshot{}, false, nil
	}
	if err != nil {
		return refill.SchemaSnapshot{}, false, fmt.Errorf("latest schema of %s: %w", dataset, err)
	}
	if err := json.Unmarshal([]byte(cols), &snap.Columns); err != nil {
		return refill.SchemaSnapshot{}, false, fmt.Errorf("latest schema of %s: %w", dataset, err)
	}
	return snap, true, nil
}

// verificationf returns an error wrapping refill.ErrVerification whose text
// is the message alone, as refill.NotFoundf does for ErrNotFound.
func verificationf(format string, args ...any) error {
	return &classified{msg: fmt.Sprintf(format, args...), kind: refill.ErrVerification}
}

type classified struct {
	msg  string
	kind error
}

func (e *classified) Error() string { return e.msg }
func (e *classified) Unwrap() error { return e.kind }

// redact hides the DSN's passwords in an error's text (dsn.RedactError).
func redact(err error, d string) error { return dsn.RedactError(err, d) }

// selectionKey is the request's selectors as stored beside its targets:
// "" for dataset names alone, else their JSON.
func selectionKey(r refill.Request) (string, error) {
	if len(r.Select) == 0 && len(r.Exclude) == 0 && !r.NoDownstream {
		return "", nil
	}
	b, err := json.Marshal(map[string]any{"select": r.Select, "exclude": r.Exclude, "no_downstream": r.NoDownstream})
	return string(b), err
}
