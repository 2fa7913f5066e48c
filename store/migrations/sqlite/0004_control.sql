-- Which partitions each plan rewrites: the index behind overlap locks (two
-- live plans may not hold one dataset partition) and behind history.
CREATE TABLE plan_partitions (
    plan_id   TEXT NOT NULL,
    dataset   TEXT NOT NULL,
    partition TEXT NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
) STRICT;

CREATE INDEX plan_partitions_lookup ON plan_partitions (dataset, partition);

-- Approvals and rejections, each bound to the hash of the plan decided on.
CREATE TABLE approvals (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id   TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    actor     TEXT NOT NULL,
    decision  TEXT NOT NULL,
    note      TEXT NOT NULL,
    at        TEXT NOT NULL
) STRICT;

CREATE INDEX approvals_plan ON approvals (plan_id, seq);

-- The manual checklist's recorded steps: who did what, when.
CREATE TABLE checklist (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id TEXT NOT NULL,
    step    TEXT NOT NULL,
    actor   TEXT NOT NULL,
    note    TEXT NOT NULL,
    detail  TEXT NOT NULL,
    at      TEXT NOT NULL,
    UNIQUE (plan_id, step)
) STRICT;

-- Partitions copied before a manual run, with the digest a rollback must
-- reproduce.
CREATE TABLE snapshots (
    plan_id        TEXT NOT NULL,
    dataset        TEXT NOT NULL,
    tbl            TEXT NOT NULL,
    partition      TEXT NOT NULL,
    snapshot_table TEXT NOT NULL,
    rows           INTEGER NOT NULL,
    checksum       TEXT NOT NULL,
    source         INTEGER NOT NULL,
    PRIMARY KEY (plan_id, dataset, partition)
) STRICT;
