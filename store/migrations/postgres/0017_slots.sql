-- Slots: a dataset's partition jobs running now, in any process. refill
-- takes one before a partition job builds and gives it back after, so a
-- dataset's run.max_active holds across every worker (River's queues have
-- only a per-process worker count). key is the partition (plan, dataset,
-- partition): one job at a time builds it. holder is the job, process the
-- host:pid running it; alive_until is renewed while the job runs, so a slot of a
-- process that died lapses on its own.
CREATE TABLE run_slots (
    dataset text NOT NULL,
    key     text NOT NULL,
    holder  text NOT NULL,
    process text NOT NULL,
    alive_until timestamptz NOT NULL,
    PRIMARY KEY (dataset, key)
);
