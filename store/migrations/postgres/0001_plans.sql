-- Plans are immutable: body is the plan as it was saved and is never
-- updated; the hash it was saved with is checked against it on every load.
-- Only status moves. The other columns repeat fields of body so that listing
-- plans reads no bodies. body is text, not jsonb, so that it is kept byte for
-- byte as written.
CREATE TABLE plans (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- insertion order: ties in created_at still list newest first
    id           text NOT NULL UNIQUE,
    hash         text NOT NULL,
    status       text NOT NULL,
    tier         text NOT NULL,
    created_at   timestamptz NOT NULL,
    requested_by text NOT NULL,
    targets      text NOT NULL,     -- JSON array of dataset names
    range_from   text NOT NULL,
    range_to     text NOT NULL,
    reason       text NOT NULL,
    datasets     integer NOT NULL,
    partitions   bigint NOT NULL,
    body         text NOT NULL      -- the plan as JSON, status left out
);

CREATE INDEX plans_newest ON plans (created_at DESC, seq DESC);
CREATE INDEX plans_status_newest ON plans (status, created_at DESC, seq DESC);

-- A source's columns as a plan saw them. The latest row per dataset is what
-- the next plan compares against to find schema drift. Rows are only added.
CREATE TABLE schema_snapshots (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset     text NOT NULL,
    plan_id     text NOT NULL,
    columns     text NOT NULL,      -- JSON array of {name, type}
    recorded_at timestamptz NOT NULL
);

CREATE INDEX schema_snapshots_latest ON schema_snapshots (dataset, id DESC);
