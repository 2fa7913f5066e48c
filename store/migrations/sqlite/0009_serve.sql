-- API tokens for `refill serve`: only a hash of each secret is kept, and a
-- token ends when it expires or is revoked.
CREATE TABLE api_tokens (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    user_name  TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
) STRICT;

-- Signed requests already seen (Slack interactions, by signature), kept
-- until their signing window has passed, so one request is honoured once
-- even across replicas.
CREATE TABLE replay_cache (
    key        TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL
) STRICT;

-- The freeze: while its one row exists no automatic apply runs.
CREATE TABLE freezes (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    frozen_by TEXT NOT NULL,
    reason    TEXT NOT NULL,
    frozen_at TEXT NOT NULL
) STRICT;

-- A request to stop a plan's run: no new partition starts once it exists.
CREATE TABLE cancel_requests (
    plan_id      TEXT PRIMARY KEY,
    actor        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    requested_at TEXT NOT NULL
) STRICT;

-- Messages posted about a plan (Slack's channel and ts), so later outcomes
-- update the message rather than post a new one; and which events were
-- delivered, so a notice is sent once.
CREATE TABLE notices (
    plan_id  TEXT NOT NULL,
    target   TEXT NOT NULL,
    channel  TEXT NOT NULL DEFAULT '',
    ts       TEXT NOT NULL DEFAULT '',
    sent_at  TEXT NOT NULL,
    PRIMARY KEY (plan_id, target)
) STRICT;
CREATE TABLE notices_sent (
    event_seq INTEGER NOT NULL,
    target    TEXT NOT NULL,
    sent_at   TEXT NOT NULL,
    PRIMARY KEY (event_seq, target)
) STRICT;

-- The web UI's signing secret (CSRF tokens, flash messages), shared by
-- every replica serving this store so a form made by one is accepted by
-- another, and kept across restarts.
CREATE TABLE web_secret (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL
) STRICT;
