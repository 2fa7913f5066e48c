-- Every partition a run published, once: the primary key is what makes a
-- partition's publish count exactly one, however often a job is retried or
-- a run resumed. Rows before and after are what the report compares.
CREATE TABLE run_partitions (
    plan_id         text NOT NULL,
    dataset         text NOT NULL,
    partition       text NOT NULL,
    rows_before     bigint,
    checksum_before text NOT NULL,
    rows_after      bigint,
    checksum_after  text NOT NULL,
    attempt         bigint NOT NULL,
    output          text NOT NULL,
    published_at    timestamptz NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
);
