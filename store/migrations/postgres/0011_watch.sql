-- The watcher's last decision about each plan it found over a gap, with
-- the fingerprint of the inputs it decided on: a blocked or rejected gap is
-- planned again only when its source's data or the config changed, and a
-- decision is audited once, not at every tick.
CREATE TABLE watch_state (
    plan_id     text PRIMARY KEY,
    dataset     text NOT NULL,
    action      text NOT NULL,
    fingerprint text NOT NULL,
    decided_at  timestamptz NOT NULL
);
