-- The audit log: append-only, hash-chained. Each entry's hash covers its
-- content and the previous entry's hash; audit_head holds the last entry, so
-- removing entries from the end is caught too. refill never updates or
-- deletes a row here.
CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY,
    at         TEXT NOT NULL,
    actor      TEXT NOT NULL,
    event      TEXT NOT NULL,
    plan_id    TEXT NOT NULL DEFAULT '',
    dataset    TEXT NOT NULL DEFAULT '',
    partition  TEXT NOT NULL DEFAULT '',
    detail     TEXT NOT NULL DEFAULT '',
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
) STRICT;

CREATE INDEX audit_log_plan ON audit_log (plan_id, seq);
CREATE INDEX audit_log_partition ON audit_log (dataset, partition, seq);

CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
) STRICT;
