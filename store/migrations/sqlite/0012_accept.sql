-- Findings accepted as real data (refill accept): one row per acceptance,
-- the newest for a (dataset, partition, check, column) the one in force.
-- measured is what the check saw when it was accepted; when the partition
-- measures differently, the acceptance has lapsed. A revoked acceptance
-- (its author or a lead withdrew it) no longer counts.
CREATE TABLE acceptances (
    id          INTEGER PRIMARY KEY,
    dataset     TEXT NOT NULL,
    partition   TEXT NOT NULL,
    check_name  TEXT NOT NULL,
    column_name TEXT NOT NULL,
    measured    TEXT NOT NULL,
    accepted_by TEXT NOT NULL,
    reason      TEXT NOT NULL,
    accepted_at TEXT NOT NULL,
    revoked_by     TEXT,
    revoked_reason TEXT,
    revoked_at     TEXT
) STRICT;
-- One acceptance in force per finding and measurement: two people
-- accepting the same finding at once record it once.
CREATE UNIQUE INDEX acceptances_finding ON acceptances (dataset, partition, check_name, column_name, measured) WHERE revoked_at IS NULL;
