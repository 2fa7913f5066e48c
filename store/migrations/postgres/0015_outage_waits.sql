-- Partitions waiting out an outage of the warehouse (run.outage_patience):
-- what they wait for and since when, for refill show. A row goes when the
-- wait ends.
CREATE TABLE outage_waits (
    plan_id     text NOT NULL,
    dataset     text NOT NULL,
    partition   text NOT NULL,
    waiting_for text NOT NULL,
    since       timestamptz NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
);
