-- Proof evidence: one row per `refill prove`, never updated. The latest row
-- for a dataset and job fingerprint decides whether the job is proven.
CREATE TABLE proofs (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset     text NOT NULL,
    partition   text NOT NULL,
    fingerprint text NOT NULL,
    passed      boolean NOT NULL,
    proven_at   timestamptz NOT NULL,
    proven_by   text NOT NULL,
    body        text NOT NULL      -- the proof as JSON: builds, digests, verdict
);

CREATE INDEX proofs_dataset ON proofs (dataset, seq DESC);

-- Partitions the source gate found bad. Volume checks leave them out of the
-- history they compare against, so one incident does not hide the next.
CREATE TABLE gate_flags (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset    text NOT NULL,
    partition  text NOT NULL,
    "check"    text NOT NULL,
    plan_id    text NOT NULL,
    flagged_at timestamptz NOT NULL
);

CREATE INDEX gate_flags_dataset ON gate_flags (dataset, partition);
