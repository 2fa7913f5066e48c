-- Drift baselines: a schema becomes the baseline only when accepted — by a
-- person (`refill schema accept`) or by applying a plan that saw it — never
-- because some plan happened to see it.
ALTER TABLE schema_snapshots ADD COLUMN accepted_by TEXT;
ALTER TABLE schema_snapshots ADD COLUMN reason TEXT;

-- A live run's lease: a second apply never resumes a run that is still
-- alive, and one whose holder died (lease expired, or its process gone on
-- this host) is resumed.
CREATE TABLE run_leases (
    plan_id    TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;

-- Operations that write to the warehouse and the state store: the intent is
-- written first, so a crash between the two is finished or cleaned up by
-- retrying the command.
CREATE TABLE pending_ops (
    plan_id    TEXT NOT NULL,
    op         TEXT NOT NULL,
    actor      TEXT NOT NULL,
    detail     TEXT NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (plan_id, op)
) STRICT;

-- The store's identity: the warehouse keeps the audit log's anchors per
-- state store, since one warehouse may serve several (a team moving from
-- SQLite to PostgreSQL, or tests).
CREATE TABLE refill_meta (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    store_id TEXT NOT NULL
) STRICT;
INSERT INTO refill_meta (id, store_id) VALUES (1, lower(hex(randomblob(16))));
