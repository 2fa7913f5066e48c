-- Partitions waiting out an outage of the warehouse (run.outage_patience):
-- what they wait for and since when, for refill show. A row goes when the
-- wait ends.
CREATE TABLE outage_waits (
    plan_id     TEXT NOT NULL,
    dataset     TEXT NOT NULL,
    partition   TEXT NOT NULL,
    waiting_for TEXT NOT NULL,
    since       TEXT NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
) STRICT;
