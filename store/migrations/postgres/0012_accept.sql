-- Findings accepted as real data (refill accept): one row per acceptance,
-- the newest for a (dataset, partition, check, column) the one in force.
-- measured is what the check saw when it was accepted; when the partition
-- measures differently, the acceptance has lapsed. A revoked acceptance
-- (its author or a lead withdrew it) no longer counts.
CREATE TABLE acceptances (
    id          bigserial PRIMARY KEY,
    dataset     text NOT NULL,
    partition   text NOT NULL,
    check_name  text NOT NULL,
    column_name text NOT NULL,
    measured    text NOT NULL,
    accepted_by text NOT NULL,
    reason      text NOT NULL,
    accepted_at timestamptz NOT NULL,
    revoked_by     text,
    revoked_reason text,
    revoked_at     timestamptz
);
-- One acceptance in force per finding and measurement: two people
-- accepting the same finding at once record it once.
CREATE UNIQUE INDEX acceptances_finding ON acceptances (dataset, partition, check_name, column_name, measured) WHERE revoked_at IS NULL;
