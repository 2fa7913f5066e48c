-- Proof evidence: one row per `refill prove`, never updated. The latest row
-- for a dataset and job fingerprint decides whether the job is proven.
CREATE TABLE proofs (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset     TEXT NOT NULL,
    partition   TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    passed      INTEGER NOT NULL,
    proven_at   TEXT NOT NULL,
    proven_by   TEXT NOT NULL,
    body        TEXT NOT NULL      -- the proof as JSON: builds, digests, verdict
) STRICT;

CREATE INDEX proofs_dataset ON proofs (dataset, seq DESC);

-- Partitions the source gate found bad. Volume checks leave them out of the
-- history they compare against, so one incident does not hide the next.
CREATE TABLE gate_flags (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset    TEXT NOT NULL,
    partition  TEXT NOT NULL,
    "check"    TEXT NOT NULL,
    plan_id    TEXT NOT NULL,
    flagged_at TEXT NOT NULL
) STRICT;

CREATE INDEX gate_flags_dataset ON gate_flags (dataset, partition);
