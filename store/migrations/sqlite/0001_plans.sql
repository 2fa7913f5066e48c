-- Plans are immutable: body is the plan as it was saved and is never
-- updated; the hash it was saved with is checked against it on every load.
-- Only status moves. The other columns repeat fields of body so that listing
-- plans reads no bodies.
CREATE TABLE plans (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT, -- insertion order: ties in created_at (a fixed REFILL_NOW) still list newest first
    id           TEXT NOT NULL UNIQUE,
    hash         TEXT NOT NULL,
    status       TEXT NOT NULL,
    tier         TEXT NOT NULL,
    created_at   TEXT NOT NULL,     -- fixed-width UTC RFC 3339, so text order is time order
    requested_by TEXT NOT NULL,
    targets      TEXT NOT NULL,     -- JSON array of dataset names
    range_from   TEXT NOT NULL,
    range_to     TEXT NOT NULL,
    reason       TEXT NOT NULL,
    datasets     INTEGER NOT NULL,
    partitions   INTEGER NOT NULL,
    body         TEXT NOT NULL      -- the plan as JSON, status left out
) STRICT;

CREATE INDEX plans_newest ON plans (created_at DESC, seq DESC);
CREATE INDEX plans_status_newest ON plans (status, created_at DESC, seq DESC);

-- A source's columns as a plan saw them. The latest row per dataset is what
-- the next plan compares against to find schema drift. Rows are only added.
CREATE TABLE schema_snapshots (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset     TEXT NOT NULL,
    plan_id     TEXT NOT NULL,
    columns     TEXT NOT NULL,      -- JSON array of {name, type}
    recorded_at TEXT NOT NULL
) STRICT;

CREATE INDEX schema_snapshots_latest ON schema_snapshots (dataset, id DESC);
