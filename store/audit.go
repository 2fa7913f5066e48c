package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/refill-dev/refill"
)

// SetAuditKey sets the secret that new audit entries are keyed with
// (HMAC-SHA256), and that keyed entries are verified with. A nil or empty
// key unsets it. The key lives only in memory (it comes from the
// environment variable named by audit.key_env), never in the database.
// Without a key, entries are hashed with plain SHA-256, which shows the
// chain is whole but can be recomputed by anyone who can write the state
// store; and a log that is already keyed can then be neither verified nor
// written (AuditKeyError). Set it before the store is shared.
func (s *Store) SetAuditKey(key []byte) {
	if len(key) == 0 {
		s.key = nil
		return
	}
	s.key = bytes.Clone(key)
}

func (s *Store) auditKey() []byte { return s.key }

// auditKey returns the key of the store this transaction belongs to.
func (t *Tx) auditKey() ([]byte, error) { return t.key, nil }

// AuditKeyError is a keyed audit log met without its key: it can be neither
// verified nor written, since an unkeyed entry after keyed ones is exactly
// what someone forging entries without the key would write.
type AuditKeyError struct {
	// KeyedFrom is the first keyed entry.
	KeyedFrom int64
}

func (e *AuditKeyError) Error() string {
	return fmt.Sprintf("the audit log is keyed from entry %d: set the key (env var named by audit.key_env) to verify or write it", e.KeyedFrom)
}

// Unwrap makes the error a configuration problem: nothing is broken, the
// key is missing.
func (e *AuditKeyError) Unwrap() error { return refill.ErrBadInput }

// Append adds e to the audit log, chained to the entry before it. It runs
// inside the transaction of the change it records, so the two commit or
// fail together. Seq, At, AsOf, PrevHash and Hash are set here.
//
// At is the store's clock, which is the real one (WithClock hands a test
// another). A caller's clock (e.At, or e.AsOf) more than a second away
// from it, such as REFILL_NOW, is kept as AsOf. With the
// store's audit key the entry is keyed, and the first keyed entry marks
// where keying began (keyed_from); without one it is refused if the log is
// keyed already.
func (t *Tx) Append(ctx context.Context, e *refill.Event) error {
	if e.Kind == "" || e.Actor == "" {
		return fmt.Errorf("audit: an entry needs an event and an actor")
	}
	key, err := t.auditKey()
	if err != nil {
		return err
	}
	head, err := readHead(ctx, t.tx, t.d)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	keyedFrom := head.keyedFrom
	switch {
	case keyedFrom == 0 && strings.HasPrefix(head.hash, refill.HashKeyed):
		return verificationf("audit: the log's last entry (%d) is keyed but the log has no record of where keying began: run refill audit verify", head.seq)
	case keyedFrom > 0 && key == nil:
		return &AuditKeyError{KeyedFrom: keyedFrom}
	}
	stamp(e, t.clock())
	e.Seq, e.PrevHash = head.seq+1, head.hash
	if len(e.Detail) == 0 {
		e.Detail = []byte("{}")
	}
	if key != nil {
		e.Hash = e.ComputeKeyedHash(key)
		if keyedFrom == 0 {
			keyedFrom = e.Seq
			// Keying begins: a keyed log always has a verification
			// checkpoint (at its genesis until a write moves it on), so
			// one that has none had it removed (see verifier.run).
			if _, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO audit_checkpoint (id, seq, hash, mac) VALUES (1, 0, ?, ?)
				ON CONFLICT (id) DO NOTHING`), refill.GenesisHash, checkpointMAC(key, 0, refill.GenesisHash)); err != nil {
				return fmt.Errorf("audit: checkpoint: %w", err)
			}
		}
	} else {
		e.Hash = e.ComputeHash()
	}
	var asOf any
	if !e.AsOf.IsZero() {
		asOf = t.d.timestamp(e.AsOf)
	}
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`
		INSERT INTO audit_log (seq, at, as_of, actor, event, plan_id, dataset, partition, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.Seq, t.d.timestamp(e.At), asOf, e.Actor, e.Kind, e.PlanID, e.Dataset, e.Partition, string(e.Detail), e.PrevHash, e.Hash)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	var mark any
	if keyedFrom > 0 {
		mark = keyedFrom
	}
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`
		INSERT INTO audit_head (id, seq, hash, keyed_from) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, keyed_from = excluded.keyed_from`), e.Seq, e.Hash, mark)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if t.outbox != nil {
		if err := t.outbox(ctx, t, e); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	return nil
}

// stamp dates e by the real clock now, keeping the caller's clock as AsOf
// when it is more than a second away. Both are cut to microseconds, what
// PostgreSQL keeps, so the hash survives a reload.
func stamp(e *refill.Event, now time.Time) {
	now = now.UTC().Truncate(time.Microsecond)
	asOf := e.AsOf
	if asOf.IsZero() {
		asOf = e.At
	}
	e.At, e.AsOf = now, time.Time{}
	if d := asOf.Sub(now); !asOf.IsZero() && (d > time.Second || d < -time.Second) {
		e.AsOf = asOf.UTC().Truncate(time.Microsecond)
	}
}

// AuditHead returns the log's last entry as an anchor, to be recorded
// outside the state store (the runner writes it into the warehouse at each
// publish). An empty log's head is entry 0 with refill.GenesisHash.
func (s *Store) AuditHead(ctx context.Context) (refill.AuditAnchor, error) {
	return auditHead(ctx, s.db, s.d)
}

// AuditHead returns the log's last entry as this transaction sees it, which
// includes the entries it appended.
func (t *Tx) AuditHead(ctx context.Context) (refill.AuditAnchor, error) {
	return auditHead(ctx, t.tx, t.d)
}

func auditHead(ctx context.Context, q querier, d dialect) (refill.AuditAnchor, error) {
	h, err := readHead(ctx, q, d)
	if err != nil {
		return refill.AuditAnchor{}, fmt.Errorf("audit log head: %w", err)
	}
	return refill.AuditAnchor{Seq: h.seq, Hash: h.hash, Keyed: h.keyedFrom > 0}, nil
}

// SealAnchor returns a, a head of this store's log (AuditHead) with its
// Store set, bound by a MAC under the audit key: someone who can write the
// warehouse but lacks the key cannot then write anchors for another store
// id, nor drop a keyed anchor's Keyed. Without a key a is returned as it
// is.
func (s *Store) SealAnchor(a refill.AuditAnchor) refill.AuditAnchor {
	a.MAC = ""
	if key := s.auditKey(); key != nil {
		a.MAC = anchorMAC(key, a)
	}
	return a
}

// anchorMAC binds an anchor's store id, entry, hash and keyed flag under
// key.
func anchorMAC(key []byte, a refill.AuditAnchor) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "refill audit anchor\n%s\n%d\n%s\n%t", a.Store, a.Seq, a.Hash, a.Keyed)
	return refill.HashKeyed + hex.EncodeToString(m.Sum(nil))
}

// head is the audit_head row: the last entry, and the first keyed one (0
// while the log is unkeyed). An empty log has entry 0 with the genesis hash.
type head struct {
	seq       int64
	hash      string
	keyedFrom int64
	found     bool
}

func readHead(ctx context.Context, q querier, d dialect) (head, error) {
	h := head{hash: refill.GenesisHash}
	var keyedFrom sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT seq, hash, keyed_from FROM audit_head WHERE id = 1`).Scan(&h.seq, &h.hash, &keyedFrom)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return h, nil
	case err != nil:
		return h, err
	}
	h.found, h.keyedFrom = true, keyedFrom.Int64
	return h, nil
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	Kind      refill.EventKind
	PlanID    string
	Dataset   string
	Partition string
	// Unchecked reads entries as stored, without checking each against
	// its keyed hash: for showing a log that may be damaged, never for
	// deciding from it.
	Unchecked bool
}

const auditColumns = `seq, at, as_of, actor, event, plan_id, dataset, partition, detail, prev_hash, hash`

// Audit returns audit entries in log order.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]refill.Event, error) {
	q := `SELECT ` + auditColumns + ` FROM audit_log WHERE 1 = 1`
	var args []any
	if f.Kind != "" {
		q += ` AND event = ?`
		args = append(args, f.Kind)
	}
	if f.PlanID != "" {
		q += ` AND plan_id = ?`
		args = append(args, f.PlanID)
	}
	if f.Dataset != "" {
		q += ` AND dataset = ?`
		args = append(args, f.Dataset)
	}
	if f.Partition != "" {
		q += ` AND partition = ?`
		args = append(args, f.Partition)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	out := []refill.Event{}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// Decisions are read from these (a rejection, a rollback): each must
	// be the entry it was written as (checkEntries).
	if !f.Unchecked {
		if err := checkEntries(ctx, s.db, s.auditKey(), out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func scanEvent(row interface{ Scan(...any) error }) (refill.Event, error) {
	var (
		e      refill.Event
		at     timestamp
		asOf   sql.Null[timestamp]
		detail string
	)
	if err := row.Scan(&e.Seq, &at, &asOf, &e.Actor, &e.Kind, &e.PlanID, &e.Dataset, &e.Partition, &detail, &e.PrevHash, &e.Hash); err != nil {
		return e, err
	}
	e.At, e.Detail = at.Time, []byte(detail)
	if asOf.Valid {
		e.AsOf = asOf.V.Time
	}
	return e, nil
}

// VerifyOptions are what a verification checks beyond the chain itself.
type VerifyOptions struct {
	// Anchor is a head recorded outside the state store (in the warehouse,
	// at a publish). The log must still hold entry Anchor.Seq with exactly
	// Anchor.Hash, so a log truncated below it, or rewritten and re-hashed
	// up to and past it, fails however consistent it is in itself.
	Anchor *refill.AuditAnchor
	// Elsewhere are the latest anchors the warehouse holds of other state
	// store ids, given when it holds none of this one's (Anchor nil). The
	// store id is the one thing an anchor is found by, and it is kept in
	// the state store: whoever changes it sheds the anchors that would
	// show a log cut short or re-hashed. So anchors elsewhere and none here
	// fail, unless their MAC shows they were written under another key
	// than this store's.
	Elsewhere []refill.AuditAnchor
}

// AuditReport is what a verification of the chain found.
type AuditReport struct {
	// Entries is the length of the log.
	Entries int    `json:"entries"`
	Head    string `json:"head"`
	OK      bool   `json:"ok"`
	// Keyed is true once entries are keyed, from entry KeyedFrom on;
	// entries before it are an unkeyed chain from before keys were used.
	Keyed     bool  `json:"keyed"`
	KeyedFrom int64 `json:"keyed_from,omitempty"`
	// Anchor is the outside anchor checked, if one was given.
	Anchor *refill.AuditAnchor `json:"anchor,omitempty"`
	// From is the checkpoint an incremental verification started after: the
	// entries up to it were verified before and were not read again.
	From int64 `json:"from,omitempty"`
	// Read counts the entries read, which for an incremental verification
	// is bounded by the entries written since its checkpoint.
	Read int `json:"read"`
	// Warning says what the log does not protect against, when it is not
	// keyed.
	Warning string `json:"warning,omitempty"`
	// Broken names the first entry that fails, and how.
	Broken *BrokenEntry `json:"broken,omitempty"`
}

// BrokenEntry is the first place the chain does not hold. Seq is 0 when no
// one entry is at fault (the warehouse holds anchors of another store id).
type BrokenEntry struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
}

// VerifyAudit walks the whole chain from the first entry: every entry must
// follow the one before it (seq one more, prev_hash its hash) and hash to
// its stored hash; entries before keyed_from must be unkeyed and entries
// from it on keyed, verifying with the store's key; the last must be the
// recorded head; and the log must agree with opts.Anchor and with its own
// checkpoint. It reads one snapshot of the log, so entries appended
// meanwhile are neither seen nor mistaken for damage.
//
// It returns a report and, when the chain is broken, an error wrapping
// refill.ErrVerification that names the first broken entry. A keyed log
// without the key is an AuditKeyError.
//
// opts is optional, so that VerifyAudit(ctx) keeps its meaning; at most one
// may be given.
func (s *Store) VerifyAudit(ctx context.Context, opts ...VerifyOptions) (AuditReport, error) {
	o, err := oneOption(opts)
	if err != nil {
		return AuditReport{}, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return AuditReport{}, fmt.Errorf("audit log: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	v := verifier{ctx: ctx, q: tx, d: s.d, key: s.auditKey(), anchor: o.Anchor, elsewhere: o.Elsewhere}
	return v.run(false)
}

func oneOption(opts []VerifyOptions) (VerifyOptions, error) {
	switch len(opts) {
	case 0:
		return VerifyOptions{}, nil
	case 1:
		return opts[0], nil
	}
	return VerifyOptions{}, fmt.Errorf("audit verify: %d sets of options given, want at most one", len(opts))
}

// VerifyAuditFrom verifies the log from its checkpoint, the entry up to
// which it was last verified, to the head, and then moves the checkpoint to
// the head: the check to run before each write, whose cost grows with the
// entries written since the last one and not with the log. It checks that
// the checkpoint's MAC holds (keyed with the audit key when there is one)
// and that the checkpoint's entry still has the hash it was verified with,
// and opts.Anchor as VerifyAudit does. Entries before the checkpoint are
// not read again; VerifyAudit reads them all. Without a checkpoint, or
// with one it cannot check for want of the key, it starts from the first
// entry.
//
// It runs in a write transaction, so it takes turns with appends.
func (s *Store) VerifyAuditFrom(ctx context.Context, opts ...VerifyOptions) (AuditReport, error) {
	o, err := oneOption(opts)
	if err != nil {
		return AuditReport{}, err
	}
	var rep AuditReport
	err = s.Update(ctx, func(tx *Tx) error {
		v := verifier{ctx: ctx, q: tx.tx, d: s.d, key: s.auditKey(), anchor: o.Anchor, elsewhere: o.Elsewhere}
		var err error
		if rep, err = v.run(true); err != nil {
			return err
		}
		return v.advance()
	})
	return rep, err
}

// checkpoint is the audit_checkpoint row.
type checkpoint struct {
	seq  int64
	hash string
	mac  string
}

// checkpointMAC binds a checkpoint's entry and hash: an HMAC under the
// audit key, or a plain hash without one, which guards against accidents
// but not against someone who can write the state store.
func checkpointMAC(key []byte, seq int64, hash string) string {
	msg := fmt.Appendf(nil, "refill audit checkpoint\n%d\n%s", seq, hash)
	if key == nil {
		sum := sha256.Sum256(msg)
		return refill.HashPlain + hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return refill.HashKeyed + hex.EncodeToString(m.Sum(nil))
}

// verifier is one verification of the chain, over one transaction.
type verifier struct {
	ctx       context.Context
	q         querier
	d         dialect
	key       []byte
	anchor    *refill.AuditAnchor
	elsewhere []refill.AuditAnchor

	rep  AuditReport
	head head
	cp   *checkpoint // nil: none, or one that cannot be checked without the key
	// cpRow is whether a checkpoint row exists at all.
	cpRow bool
}

func (v *verifier) broken(seq int64, format string, args ...any) (AuditReport, error) {
	v.rep.OK = false
	v.rep.Broken = &BrokenEntry{Seq: seq, Problem: fmt.Sprintf(format, args...)}
	return v.rep, fmt.Errorf("%w: audit log entry %d: %s", refill.ErrVerification, seq, v.rep.Broken.Problem)
}

// run verifies the chain: from its checkpoint when incremental, else from
// the first entry.
func (v *verifier) run(incremental bool) (AuditReport, error) {
	if a := v.anchor; a != nil {
		if a.Seq < 0 || (a.Seq > 0 && a.Hash == "") {
			return AuditReport{}, refill.BadInputf("audit anchor %d %q is not an entry of a log: want a seq of 1 or more and its hash", a.Seq, a.Hash)
		}
		v.rep.Anchor = &refill.AuditAnchor{Seq: a.Seq, Hash: a.Hash, Keyed: a.Keyed}
	}
	var err error
	if v.head, err = readHead(v.ctx, v.q, v.d); err != nil {
		return v.rep, fmt.Errorf("audit log: %w", err)
	}
	h := v.head
	v.rep.Entries, v.rep.Keyed, v.rep.KeyedFrom = int(h.seq), h.keyedFrom > 0, h.keyedFrom
	if h.keyedFrom > 0 && v.key == nil {
		return v.rep, &AuditKeyError{KeyedFrom: h.keyedFrom}
	}
	// A bad checkpoint stops an incremental check at once, since it would
	// start there; the full walk reports it after the entries, so that a
	// wrong key is reported at the first keyed entry.
	cpProblem, err := v.loadCheckpoint()
	if err != nil {
		return v.rep, err
	}
	if incremental && cpProblem != "" {
		return v.broken(v.cp.seq, "%s", cpProblem)
	}

	prevSeq, prev := int64(0), refill.GenesisHash
	if incremental && v.cp != nil {
		switch {
		case !h.found && v.cp.seq > 0:
			return v.broken(v.cp.seq, "the log's head record is missing")
		case v.cp.seq > h.seq:
			return v.broken(h.seq+1, "is missing: the log ends at entry %d, but it was verified up to entry %d: entries were removed from the end", h.seq, v.cp.seq)
		}
		if v.cp.seq == 0 && v.cp.hash != refill.GenesisHash {
			return v.broken(0, "the verification checkpoint at the log's start was altered")
		}
		if v.cp.seq > 0 {
			e, found, err := v.entry(v.cp.seq)
			switch {
			case err != nil:
				return v.rep, err
			case !found:
				return v.broken(v.cp.seq, "is missing: the log was verified up to this entry, and it is gone")
			case e.Hash != v.cp.hash:
				return v.broken(v.cp.seq, "was replaced: its hash is %s, but it was %s when the log was verified up to it", short(e.Hash), short(v.cp.hash))
			}
			if problem := v.content(&e); problem != "" {
				return v.broken(e.Seq, "%s", problem)
			}
		}
		prevSeq, prev, v.rep.From = v.cp.seq, v.cp.hash, v.cp.seq
	}

	// Hashes of the entries the checkpoint and the anchor name, when the
	// walk passes them.
	seen := map[int64]string{}
	if v.cp != nil {
		seen[v.cp.seq] = ""
	}
	if v.anchor != nil {
		seen[v.anchor.Seq] = ""
	}
	if incremental && v.cp != nil {
		seen[v.cp.seq] = v.cp.hash // its entry was checked above
	}
	var bad *BrokenEntry
	rows, err := v.q.QueryContext(v.ctx, v.d.rebind(`SELECT `+auditColumns+` FROM audit_log WHERE seq > ? ORDER BY seq`), prevSeq)
	if err != nil {
		return v.rep, fmt.Errorf("audit log: %w", err)
	}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			rows.Close()
			return v.rep, fmt.Errorf("audit log: %w", err)
		}
		v.rep.Read++
		if bad = v.follows(&e, prevSeq, prev); bad != nil {
			break
		}
		if _, ok := seen[e.Seq]; ok {
			seen[e.Seq] = e.Hash
		}
		prevSeq, prev = e.Seq, e.Hash
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return v.rep, fmt.Errorf("audit log: %w", err)
	}
	if bad != nil {
		return v.broken(bad.Seq, "%s", bad.Problem)
	}

	switch {
	case !h.found && prevSeq > 0:
		return v.broken(prevSeq, "the log's head record is missing")
	case h.seq != prevSeq || h.hash != prev:
		return v.broken(prevSeq+1, "the log ends at entry %d but its head says %d: entries were removed from the end", prevSeq, h.seq)
	}
	if !incremental && v.cp != nil && v.cp.seq == 0 {
		if cpProblem != "" || v.cp.hash != refill.GenesisHash {
			return v.broken(0, "the verification checkpoint at the log's start was altered")
		}
	} else if !incremental && v.cp != nil {
		switch {
		case cpProblem != "":
			return v.broken(v.cp.seq, "%s", cpProblem)
		case v.cp.seq > prevSeq:
			return v.broken(prevSeq+1, "is missing: the log ends at entry %d, but it was verified up to entry %d: entries were removed from the end", prevSeq, v.cp.seq)
		case seen[v.cp.seq] != v.cp.hash:
			return v.broken(v.cp.seq, "was replaced: its hash is %s, but it was %s when the log was verified up to it", short(seen[v.cp.seq]), short(v.cp.hash))
		}
	}
	if v.anchor == nil {
		if problem := v.elsewhereProblem(); problem != "" {
			v.rep.OK = false
			v.rep.Broken = &BrokenEntry{Problem: problem}
			return v.rep, fmt.Errorf("%w: audit log: %s", refill.ErrVerification, problem)
		}
	}
	if a := v.anchor; a != nil && a.Seq > 0 {
		if problem := v.anchorProblem(); problem != "" {
			return v.broken(a.Seq, "%s", problem)
		}
		if a.Seq > prevSeq {
			return v.broken(prevSeq+1, "is missing: the anchor outside the state store says the log held entry %d (%s), but it ends at entry %d: entries were removed from the end", a.Seq, short(a.Hash), prevSeq)
		}
		got, ok := seen[a.Seq]
		if !ok || got == "" {
			// Before the checkpoint: read that one entry.
			e, found, err := v.entry(a.Seq)
			if err != nil {
				return v.rep, err
			}
			if !found {
				return v.broken(a.Seq, "is missing, but the anchor outside the state store names it (%s)", short(a.Hash))
			}
			got = e.Hash
		}
		if got != a.Hash {
			return v.broken(a.Seq, "does not match the anchor outside the state store: its hash is %s, the anchor says %s: the log was rewritten up to and past the anchor", short(got), short(a.Hash))
		}
	}
	if !incremental && !v.cpRow && h.keyedFrom > 0 {
		// Keying began by writing a checkpoint (Append), and writes only
		// move it on: a keyed log without one had it removed, which is
		// what cutting entries from its end behind refill's back needs.
		return v.broken(prevSeq, "the log's verification checkpoint is missing, though the log is keyed from entry %d: it was removed behind refill's back (as cutting entries from the end of the log would need)", h.keyedFrom)
	}

	v.rep.OK, v.rep.Head = true, prev
	switch {
	case v.rep.Keyed:
	case v.key == nil:
		v.rep.Warning = "the audit log is not keyed: anyone who can write the state store can rewrite it: set audit.key_env"
	case h.seq > 0:
		v.rep.Warning = fmt.Sprintf("the audit log is not keyed yet: entries 1 to %d can be rewritten by anyone who can write the state store until the next entry, which will be keyed, seals them", h.seq)
	}
	return v.rep, nil
}

// anchorProblem says what is wrong with this store's anchor, before its
// entry is compared with the log: a MAC that does not bind it to this
// store under the key, or a keyed anchor over a log that is not keyed
// there.
func (v *verifier) anchorProblem() string {
	a, from := v.anchor, v.head.keyedFrom
	if v.key != nil && strings.HasPrefix(a.MAC, refill.HashKeyed) && !hmac.Equal([]byte(a.MAC), []byte(anchorMAC(v.key, *a))) {
		return fmt.Sprintf("its anchor in the warehouse is not this state store's: the anchor's MAC does not match store id %s and the anchor under the audit key (the anchor was altered, the store id changed, or the key set is not the one the log was keyed with)", a.Store)
	}
	switch {
	case a.Keyed && from == 0:
		return "was anchored in the warehouse while the log was keyed, but the log is not keyed: it was downgraded, re-hashed by someone without the key"
	case a.Keyed && from > a.Seq:
		return fmt.Sprintf("was anchored in the warehouse while the log was keyed, but the log is keyed only from entry %d: it was downgraded, re-hashed by someone without the key", from)
	}
	return ""
}

// elsewhereProblem says why anchors of other store ids, and none of this
// one's, fail the log. Anchors with a MAC that does not hold under this
// store's key were written by a store with another key and are left out;
// without a key none can be.
func (v *verifier) elsewhereProblem() string {
	var ids []string
	keyed := false
	for _, a := range v.elsewhere {
		if v.key != nil && strings.HasPrefix(a.MAC, refill.HashKeyed) && !hmac.Equal([]byte(a.MAC), []byte(anchorMAC(v.key, a))) {
			continue
		}
		ids = append(ids, a.Store)
		keyed = keyed || a.Keyed
	}
	if len(ids) == 0 {
		return ""
	}
	problem := fmt.Sprintf("the warehouse holds audit anchors of another state store (ids %s) but none of this one: the store id may have been changed", strings.Join(ids, ", "))
	if keyed && v.head.keyedFrom == 0 {
		problem += "; and they were written while that log was keyed, but this log is not keyed: it may have been downgraded, re-hashed by someone without the key"
	}
	return problem
}

// loadCheckpoint reads the checkpoint and checks its MAC, returning what
// is wrong with it if anything is. A keyed one that cannot be checked
// without the key is set aside (v.cp stays nil): the walk then starts from
// the first entry, which is slower but trusts nothing.
func (v *verifier) loadCheckpoint() (problem string, err error) {
	var cp checkpoint
	err = v.q.QueryRowContext(v.ctx, `SELECT seq, hash, mac FROM audit_checkpoint WHERE id = 1`).Scan(&cp.seq, &cp.hash, &cp.mac)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("audit log checkpoint: %w", err)
	}
	v.cpRow = true
	keyed := strings.HasPrefix(cp.mac, refill.HashKeyed)
	if keyed && v.key == nil {
		return "", nil
	}
	v.cp = &cp
	switch {
	case keyed && !hmac.Equal([]byte(cp.mac), []byte(checkpointMAC(v.key, cp.seq, cp.hash))):
		return "the verification checkpoint at this entry was altered: its MAC does not match its entry and hash (or the key set is not the one the log was keyed with)", nil
	case !keyed && v.head.keyedFrom > 0 && cp.seq >= v.head.keyedFrom:
		return fmt.Sprintf("the verification checkpoint at this entry is not keyed, but the log is keyed from entry %d: it was written by someone without the key", v.head.keyedFrom), nil
	case !keyed && cp.mac != checkpointMAC(nil, cp.seq, cp.hash):
		return "the verification checkpoint at this entry was altered: its hash does not match its entry and hash", nil
	}
	return "", nil
}

// follows checks that e follows the entry before it (prevSeq, prev) and
// holds its own hash.
func (v *verifier) follows(e *refill.Event, prevSeq int64, prev string) *BrokenEntry {
	switch {
	case e.Seq != prevSeq+1:
		return &BrokenEntry{Seq: prevSeq + 1, Problem: fmt.Sprintf("is missing: the entry after %d is %d (removed or reordered)", prevSeq, e.Seq)}
	case e.PrevHash != prev:
		return &BrokenEntry{Seq: e.Seq, Problem: fmt.Sprintf("does not follow entry %d: its previous hash is %s, entry %d's hash is %s (an entry was removed, replaced or reordered)", prevSeq, short(e.PrevHash), prevSeq, short(prev))}
	}
	if problem := v.content(e); problem != "" {
		return &BrokenEntry{Seq: e.Seq, Problem: problem}
	}
	return nil
}

// content checks that e hashes to its stored hash, keyed or not as its
// place in the log demands.
func (v *verifier) content(e *refill.Event) string {
	from := v.head.keyedFrom
	switch keyed := e.Keyed(); {
	case keyed && from == 0:
		return "is keyed, but the log has no record of where keying began (keyed_from was removed from its head)"
	case keyed && e.Seq < from:
		return fmt.Sprintf("is keyed, but the log is keyed only from entry %d (keyed_from was moved)", from)
	case !keyed && from > 0 && e.Seq >= from:
		return fmt.Sprintf("is not keyed, but the log is keyed from entry %d: it was written or re-hashed by someone without the key", from)
	case keyed && !hmac.Equal([]byte(e.ComputeKeyedHash(v.key)), []byte(e.Hash)):
		hint := ""
		if e.Seq == from {
			hint = " (or the key set is not the one the log was keyed with)"
		}
		return fmt.Sprintf("was altered: its content (%s by %s, plan %s) no longer matches its keyed hash%s", e.Kind, e.Actor, e.PlanID, hint)
	case !keyed && e.ComputeHash() != e.Hash:
		return fmt.Sprintf("was altered: its content (%s by %s, plan %s) no longer hashes to its stored hash", e.Kind, e.Actor, e.PlanID)
	}
	return ""
}

// entry reads one entry.
func (v *verifier) entry(seq int64) (refill.Event, bool, error) {
	e, err := scanEvent(v.q.QueryRowContext(v.ctx, v.d.rebind(`SELECT `+auditColumns+` FROM audit_log WHERE seq = ?`), seq))
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("audit log: %w", err)
	}
	v.rep.Read++
	return e, true, nil
}

// advance moves the checkpoint to the head just verified.
func (v *verifier) advance() error {
	h := v.head
	if h.seq == 0 || (v.cp != nil && v.cp.seq == h.seq && v.cp.hash == h.hash) {
		return nil
	}
	_, err := v.q.ExecContext(v.ctx, v.d.rebind(`
		INSERT INTO audit_checkpoint (id, seq, hash, mac) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, mac = excluded.mac`),
		h.seq, h.hash, checkpointMAC(v.key, h.seq, h.hash))
	if err != nil {
		return fmt.Errorf("audit log checkpoint: %w", err)
	}
	return nil
}

func short(h string) string {
	if len(h) > 19 {
		return h[:19] + "…"
	}
	return h
}

// CheckAnchors checks anchors of this store, written into the warehouse at
// publishes, against the log: each entry an anchor names must still be in
// the log with the hash it had, and a keyed anchor's MAC must hold under
// the key. A state store put back from an older copy fails here — at once
// (the log ends before the latest anchor), and after it has grown again
// (an older anchor's entry has another hash now). It returns an error
// wrapping refill.ErrVerification naming the first anchor that fails.
func (s *Store) CheckAnchors(ctx context.Context, anchors []refill.AuditAnchor) error {
	if len(anchors) == 0 {
		return nil
	}
	key := s.auditKey()
	var maxSeq int64
	for _, a := range anchors {
		maxSeq = max(maxSeq, a.Seq)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT seq, hash FROM audit_log WHERE seq <= ? ORDER BY seq`), maxSeq)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	hashes := map[int64]string{}
	for rows.Next() {
		var seq int64
		var h string
		if err := rows.Scan(&seq, &h); err != nil {
			rows.Close()
			return fmt.Errorf("audit log: %w", err)
		}
		hashes[seq] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	for _, a := range anchors {
		if a.Seq <= 0 {
			continue
		}
		if key != nil && strings.HasPrefix(a.MAC, refill.HashKeyed) && !hmac.Equal([]byte(a.MAC), []byte(anchorMAC(key, a))) {
			return verificationf("audit log entry %d: the warehouse's anchor of it was altered (its MAC does not hold under the audit key)", a.Seq)
		}
		switch h, ok := hashes[a.Seq]; {
		case !ok:
			return verificationf("audit log entry %d is missing, but the warehouse anchored it at a publish (%s): the state store is older than the warehouse — put back from a copy, or cut short; run refill audit verify", a.Seq, short(a.Hash))
		case h != a.Hash:
			return verificationf("audit log entry %d is not the entry the warehouse anchored at a publish (hash %s, anchored %s): the log was put back from an older copy or rewritten; run refill audit verify", a.Seq, short(h), short(a.Hash))
		}
	}
	return nil
}

// CheckLatestAnchor checks the warehouse's latest anchor of this state
// store against its log (CheckAnchors), when there is a warehouse that
// holds anchors: what every write and every publish does first, so that
// nothing is written over a state store put back from an older copy
// (which would launder it). A warehouse that cannot be read passes here;
// refill audit verify says so.
func (s *Store) CheckLatestAnchor(ctx context.Context, an refill.Anchorer) error {
	if an == nil {
		return nil
	}
	id, err := s.ID(ctx)
	if err != nil {
		return err
	}
	a, found, err := an.LatestAnchor(ctx, id)
	switch {
	case err != nil:
		return nil
	case !found:
		// Every publish anchors the log: a log that records publishes
		// and a warehouse without a single anchor of this store means the
		// anchors were deleted, or the store's id changed to shed them.
		// A publish commits its anchor in the warehouse before its entry
		// here, so one that committed after the warehouse was read is
		// counted: read the warehouse again, after the count.
		n, err := s.publishes(ctx)
		if err != nil || n == 0 {
			return err
		}
		if a, found, err = an.LatestAnchor(ctx, id); err != nil {
			return nil
		} else if found {
			return s.CheckAnchors(ctx, []refill.AuditAnchor{a})
		}
		return verificationf("the warehouse holds no audit anchor of this state store (id %s), though its log records %d publish(es): the anchors were deleted, or the store's id was changed; run refill audit verify", id, n)
	}
	return s.CheckAnchors(ctx, []refill.AuditAnchor{a})
}

// publishes counts the log's partition_published entries.
func (s *Store) publishes(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT count(*) FROM audit_log WHERE event = ?`), string(refill.EventPartitionPublished)).Scan(&n)
	return n, err
}

// CheckPublishesAnchored checks that the anchor each publish's entry
// names (its detail's anchor) is among anchors, the warehouse's of this
// store: an anchor deleted from the warehouse is missed. Entries from
// before publishes named their anchor say nothing.
func (s *Store) CheckPublishesAnchored(ctx context.Context, anchors []refill.AuditAnchor) error {
	have := map[int64]bool{}
	for _, a := range anchors {
		have[a.Seq] = true
	}
	evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), []refill.EventKind{refill.EventPartitionPublished}, "", "")
	if err != nil {
		return err
	}
	for i := range evs {
		var d struct {
			Anchor int64 `json:"anchor"`
		}
		if json.Unmarshal(evs[i].Detail, &d) == nil && d.Anchor > 0 && !have[d.Anchor] {
			return verificationf("audit log entry %d (%s %s published) names the warehouse's anchor of entry %d, which the warehouse no longer holds: its anchors were deleted", evs[i].Seq, evs[i].Dataset, evs[i].Partition, d.Anchor)
		}
	}
	return nil
}
