package store

import (
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

// No row without its entry.
//
// Every state row that changes a decision — an approval, a checklist step,
// an acceptance and its revocation, a freeze, a gate flag, a schema
// baseline, an API token, a cancel request — is written in the transaction
// that appends its audit entry. Someone who can write the state store but
// cannot forge the keyed audit log can still insert, alter or delete such a
// row; so a row counts only when the log holds an entry that made it, with
// the same content, and the log, not the row, says whether it was ended (a
// revocation, an unfreeze). Where the decision is a state rather than a set
// of rows (a freeze, a cancel request), the newest entry decides even when
// its row is gone: a freeze whose row was deleted still holds.
//
// Each table declares, in a rowKind, how its rows and its entries are
// matched: a witness key that both carry. settle does the rest, for every
// table alike, and audit verify reports what it finds (VerifyRows).

// claim is what one audit entry says of one row of a table: that it made
// a row with key (and, in entries that carry it, a digest of the row's
// content), or that it ended every row of group made before it.
type claim struct {
	end    bool
	key    string
	group  string
	digest string
	// shared: the claim makes every row with its key, not one (an entry
	// written before entries named each row they made).
	shared bool
	event  refill.Event
}

// ledgerRow is a row of a table as the ledger sees it.
type ledgerRow struct {
	// id names the row in reports: its table's key.
	id  string
	key string
	// legacy is the key an entry written before this version would
	// make the row under (a shared claim), "" for none.
	legacy string
	group  string
	digest string
	// ended is true when the row itself says it was ended (revoked).
	ended bool
	// what says, for people, what the row is.
	what string
}

// verdict is what the log says of one row.
type verdict struct {
	// counts is true when an entry made the row and none ended it since.
	counts bool
	// made is the entry that made it; ended the one that ended it.
	made, ended *refill.Event
}

// rowKind is one table's rules.
type rowKind struct {
	table string
	// kinds are the audit events that make or end its rows.
	kinds []refill.EventKind
	// claims reads what an entry says of the table's rows.
	claims func(e *refill.Event) []claim
	// strict: a make without a digest (an entry written before digests
	// were) does not make a row. Set where content decides everything
	// (a token's hash).
	strict bool
}

// key joins fields into a witness.
func key(fields ...string) string { return strings.Join(fields, "\x1f") }

// digestOf is the content digest of a row's decisive fields.
func digestOf(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// settle decides which rows count, and lists what does not add up: rows
// no entry made (or whose content differs from what it made), entries
// whose row is gone, and rows whose own "ended" disagrees with the log.
// Each make backs at most one row, in log order.
func (k *rowKind) settle(rows []ledgerRow, evs []refill.Event) ([]verdict, []RowProblem) {
	var claims []claim
	for i := range evs {
		for _, c := range k.claims(&evs[i]) {
			c.event = evs[i]
			claims = append(claims, c)
		}
	}
	out := make([]verdict, len(rows))
	used := make([]bool, len(claims))
	var problems []RowProblem
	for i, r := range rows {
		for j, c := range claims {
			switch {
			case used[j] || c.end:
				continue
			case c.shared:
				if r.legacy == "" || c.key != r.legacy {
					continue
				}
			case c.key != r.key || (c.digest == "" && k.strict) || (c.digest != "" && c.digest != r.digest):
				continue
			default:
				used[j] = true
			}
			made := c.event
			out[i] = verdict{counts: true, made: &made}
			for _, e := range claims[j+1:] {
				if e.end && e.group == r.group {
					ended := e.event
					out[i].counts, out[i].ended = false, &ended
					break
				}
			}
			break
		}
		v := out[i]
		switch {
		case v.made == nil:
			problems = append(problems, RowProblem{Table: k.table, Row: r.id, Problem: fmt.Sprintf("%s has no audit entry that made it (or its content was changed since): it counts for nothing", r.what)})
		case v.ended == nil && r.ended:
			problems = append(problems, RowProblem{Table: k.table, Row: r.id, Problem: fmt.Sprintf("%s says it was ended, but the audit log records no entry that ended it", r.what)})
		case v.ended != nil && !r.ended:
			problems = append(problems, RowProblem{Table: k.table, Row: r.id, Seq: v.ended.Seq, Problem: fmt.Sprintf("%s does not say it was ended, but audit entry %d (%s by %s) ended it: the log decides", r.what, v.ended.Seq, v.ended.Kind, v.ended.Actor)})
		}
	}
	for j, c := range claims {
		if c.end || c.shared || used[j] || (c.digest == "" && k.strict) {
			continue
		}
		ended := false
		for _, e := range claims[j+1:] {
			ended = ended || (e.end && e.group == c.group)
		}
		if !ended {
			problems = append(problems, RowProblem{Table: k.table, Seq: c.event.Seq, Problem: fmt.Sprintf("audit entry %d (%s by %s) made a row that is gone from %s: it was deleted behind refill's back", c.event.Seq, c.event.Kind, c.event.Actor, k.table)})
		}
	}
	return out, problems
}

// current is, for a table whose entries decide a state rather than rows
// (a freeze, a cancel request), the claim of group that decides it: the
// newest, or with first the oldest (a cancel request stands as first
// made), or nil when there is none.
func (k *rowKind) current(evs []refill.Event, group string, first bool) *claim {
	var found *claim
	for i := range evs {
		for _, c := range k.claims(&evs[i]) {
			if c.group == group {
				c.event = evs[i]
				found = &c
				if first {
					return found
				}
			}
		}
	}
	return found
}

// RowProblem is a decision row that does not add up with the audit log.
type RowProblem struct {
	Table string `json:"table"`
	// Row names the row by its table's key; empty for a row that is gone.
	Row string `json:"row,omitempty"`
	// Seq is the audit entry concerned, if any.
	Seq     int64  `json:"seq,omitempty"`
	Problem string `json:"problem"`
}

func (p RowProblem) String() string {
	if p.Row != "" {
		return fmt.Sprintf("%s row %s: %s", p.Table, p.Row, p.Problem)
	}
	return fmt.Sprintf("%s: %s", p.Table, p.Problem)
}

// detailOf decodes an entry's detail into a map; a detail that does not
// decode says nothing.
func detailOf(e *refill.Event) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Detail, &m)
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// entriesOf reads the audit entries of kinds, in log order, narrowed by
// plan or dataset when given.
func entriesOf(ctx context.Context, q querier, d dialect, akey []byte, kinds []refill.EventKind, planID, dataset string) ([]refill.Event, error) {
	query := `SELECT ` + auditColumns + ` FROM audit_log WHERE event IN (` + placeholders(len(kinds)) + `)`
	args := make([]any, 0, len(kinds)+2)
	for _, k := range kinds {
		args = append(args, string(k))
	}
	if planID != "" {
		query += ` AND plan_id = ?`
		args = append(args, planID)
	}
	if dataset != "" {
		query += ` AND dataset = ?`
		args = append(args, dataset)
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []refill.Event
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
	if err := checkEntries(ctx, q, akey, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkEntries checks each entry read on its own, against its keyed hash:
// the per-write verification starts at the last checkpoint, so an entry
// before it could have been altered in place (another plan, another hash)
// by someone without the key, and a decision read from it would count. An
// unkeyed entry where the log is keyed is one too. A log without a key can
// be rewritten by anyone who can write the state store (audit verify
// warns); nothing here can tell.
func checkEntries(ctx context.Context, q querier, key []byte, evs []refill.Event) error {
	if key == nil || len(evs) == 0 {
		return nil
	}
	keyedFrom := int64(-1)
	for i := range evs {
		e := &evs[i]
		if e.Keyed() {
			if !hmac.Equal([]byte(e.ComputeKeyedHash(key)), []byte(e.Hash)) {
				return verificationf("audit log entry %d (%s by %s) was altered: its content no longer matches its keyed hash; run refill audit verify", e.Seq, e.Kind, e.Actor)
			}
			continue
		}
		if keyedFrom < 0 {
			var kf sql.NullInt64
			if err := q.QueryRowContext(ctx, `SELECT keyed_from FROM audit_head WHERE id = 1`).Scan(&kf); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("audit log: %w", err)
			}
			keyedFrom = kf.Int64
		}
		if keyedFrom > 0 && e.Seq >= keyedFrom {
			return verificationf("audit log entry %d (%s by %s) is not keyed, though the log is keyed from entry %d: it was written or altered by someone without the key; run refill audit verify", e.Seq, e.Kind, e.Actor, keyedFrom)
		}
	}
	return nil
}

// The tables' rules.
var (
	approvalRows = &rowKind{table: "approvals", kinds: []refill.EventKind{refill.EventApproval, refill.EventRejection},
		claims: func(e *refill.Event) []claim {
			decision := refill.DecisionApprove
			if e.Kind == refill.EventRejection {
				decision = refill.DecisionReject
			}
			return []claim{{key: key(e.PlanID, string(decision), e.Actor, str(detailOf(e), "hash"))}}
		}}
	checklistRows = &rowKind{table: "checklist", kinds: []refill.EventKind{refill.EventSnapshot, refill.EventScope, refill.EventSignoff},
		claims: func(e *refill.Event) []claim {
			if e.Partition != "" {
				return nil // a snapshot's entries per partition
			}
			return []claim{{key: key(e.PlanID, string(e.Kind), e.Actor)}}
		}}
	acceptanceRows = &rowKind{table: "acceptances", kinds: []refill.EventKind{refill.EventFindingAccepted, refill.EventAcceptanceRevoked},
		claims: func(e *refill.Event) []claim {
			m := detailOf(e)
			group := key(e.Dataset, e.Partition, str(m, "check"), str(m, "column"))
			if e.Kind == refill.EventAcceptanceRevoked {
				return []claim{{end: true, group: group}}
			}
			return []claim{{key: key(group, str(m, "measured"), e.Actor, str(m, "reason")), group: group}}
		}}
	freezeRows = &rowKind{table: "freezes", kinds: []refill.EventKind{refill.EventFreeze, refill.EventUnfreeze},
		claims: func(e *refill.Event) []claim {
			if e.Kind == refill.EventUnfreeze {
				return []claim{{end: true}}
			}
			return []claim{{key: key(e.Actor, str(detailOf(e), "reason"))}}
		}}
	flagRows = &rowKind{table: "gate_flags", kinds: []refill.EventKind{refill.EventGateResult},
		claims: func(e *refill.Event) []claim {
			m := detailOf(e)
			if e.Dataset == "" || e.Partition == "" || m["passed"] != false || str(m, "check") == "" {
				return nil
			}
			return []claim{{key: key(e.Dataset, e.Partition, str(m, "check"), e.PlanID)}}
		}}
	tokenRows = &rowKind{table: "api_tokens", kinds: []refill.EventKind{refill.EventTokenCreated, refill.EventTokenRevoked}, strict: true,
		claims: func(e *refill.Event) []claim {
			m := detailOf(e)
			if e.Kind == refill.EventTokenRevoked {
				return []claim{{end: true, group: str(m, "token")}}
			}
			var exp struct {
				ExpiresAt time.Time `json:"expires_at"`
			}
			_ = json.Unmarshal(e.Detail, &exp)
			if str(m, "hash") == "" {
				return []claim{{key: key(str(m, "token"), str(m, "user")), group: str(m, "token")}}
			}
			return []claim{{key: key(str(m, "token"), str(m, "user")), group: str(m, "token"), digest: tokenDigest(str(m, "hash"), exp.ExpiresAt)}}
		}}
	cancelRows = &rowKind{table: "cancel_requests", kinds: []refill.EventKind{refill.EventCancelRequested, refill.EventRunCancelled},
		claims: func(e *refill.Event) []claim {
			if _, ok := detailOf(e)["published"]; e.Kind == refill.EventRunCancelled && ok {
				return nil // the end of a run that was asked to stop before
			}
			return []claim{{key: key(e.PlanID, e.Actor, str(detailOf(e), "reason")), group: e.PlanID}}
		}}
)

// tokenDigest binds a token's secret hash and its expiry: neither may
// change behind refill's back (an expiry moved to 2099 keeps a token
// alive). Seconds, what both engines keep.
func tokenDigest(hash string, expires time.Time) string {
	return digestOf([]string{hash, expires.UTC().Truncate(time.Second).Format(time.RFC3339)})
}

// kinds lists every table's rules, for VerifyRows.
var rowKinds = []*rowKind{approvalRows, checklistRows, acceptanceRows, freezeRows, flagRows, schemaRows, tokenRows, cancelRows, lineageRows}
