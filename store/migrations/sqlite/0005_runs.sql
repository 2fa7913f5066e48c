-- Every partition a run published, once: the primary key is what makes a
-- partition's publish count exactly one, however often a job is retried or
-- a run resumed. Rows before and after are what the report compares.
CREATE TABLE run_partitions (
    plan_id         TEXT NOT NULL,
    dataset         TEXT NOT NULL,
    partition       TEXT NOT NULL,
    rows_before     INTEGER,
    checksum_before TEXT NOT NULL,
    rows_after      INTEGER,
    checksum_after  TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    output          TEXT NOT NULL,
    published_at    TEXT NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
) STRICT;
