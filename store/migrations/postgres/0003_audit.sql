-- The audit log: append-only, hash-chained. Each entry's hash covers its
-- content and the previous entry's hash; audit_head holds the last entry, so
-- removing entries from the end is caught too. refill never updates or
-- deletes a row here.
CREATE TABLE audit_log (
    seq        bigint PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor      text NOT NULL,
    event      text NOT NULL,
    plan_id    text NOT NULL DEFAULT '',
    dataset    text NOT NULL DEFAULT '',
    partition  text NOT NULL DEFAULT '',
    detail     text NOT NULL DEFAULT '',
    prev_hash  text NOT NULL,
    hash       text NOT NULL
);

CREATE INDEX audit_log_plan ON audit_log (plan_id, seq);
CREATE INDEX audit_log_partition ON audit_log (dataset, partition, seq);

CREATE TABLE audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash text NOT NULL
);
