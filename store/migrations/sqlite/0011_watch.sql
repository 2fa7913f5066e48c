-- The watcher's last decision about each plan it found over a gap, with
-- the fingerprint of the inputs it decided on: a blocked or rejected gap is
-- planned again only when its source's data or the config changed, and a
-- decision is audited once, not at every tick.
CREATE TABLE watch_state (
    plan_id     TEXT PRIMARY KEY,
    dataset     TEXT NOT NULL,
    action      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    decided_at  TEXT NOT NULL
) STRICT;
