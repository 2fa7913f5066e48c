-- Which partitions each plan rewrites: the index behind overlap locks (two
-- live plans may not hold one dataset partition) and behind history.
CREATE TABLE plan_partitions (
    plan_id   text NOT NULL,
    dataset   text NOT NULL,
    partition text NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
);

CREATE INDEX plan_partitions_lookup ON plan_partitions (dataset, partition);

-- Approvals and rejections, each bound to the hash of the plan decided on.
CREATE TABLE approvals (
    seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_id   text NOT NULL,
    plan_hash text NOT NULL,
    actor     text NOT NULL,
    decision  text NOT NULL,
    note      text NOT NULL,
    at        timestamptz NOT NULL
);

CREATE INDEX approvals_plan ON approvals (plan_id, seq);

-- The manual checklist's recorded steps: who did what, when.
CREATE TABLE checklist (
    seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    plan_id text NOT NULL,
    step    text NOT NULL,
    actor   text NOT NULL,
    note    text NOT NULL,
    detail  text NOT NULL,
    at      timestamptz NOT NULL,
    UNIQUE (plan_id, step)
);

-- Partitions copied before a manual run, with the digest a rollback must
-- reproduce.
CREATE TABLE snapshots (
    plan_id        text NOT NULL,
    dataset        text NOT NULL,
    tbl            text NOT NULL,
    partition      text NOT NULL,
    snapshot_table text NOT NULL,
    rows           bigint NOT NULL,
    checksum       text NOT NULL,
    source         boolean NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
);
