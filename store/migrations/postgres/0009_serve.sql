-- API tokens for `refill serve`: only a hash of each secret is kept, and a
-- token ends when it expires or is revoked.
CREATE TABLE api_tokens (
    id         text PRIMARY KEY,
    hash       text NOT NULL UNIQUE,
    user_name  text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz
);

-- Signed requests already seen (Slack interactions, by signature), kept
-- until their signing window has passed, so one request is honoured once
-- even across replicas.
CREATE TABLE replay_cache (
    key        text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- The freeze: while its one row exists no automatic apply runs.
CREATE TABLE freezes (
    id        integer PRIMARY KEY CHECK (id = 1),
    frozen_by text NOT NULL,
    reason    text NOT NULL,
    frozen_at timestamptz NOT NULL
);

-- A request to stop a plan's run: no new partition starts once it exists.
CREATE TABLE cancel_requests (
    plan_id      text PRIMARY KEY,
    actor        text NOT NULL,
    reason       text NOT NULL,
    requested_at timestamptz NOT NULL
);

-- Messages posted about a plan (Slack's channel and ts), so later outcomes
-- update the message rather than post a new one; and which events were
-- delivered, so a notice is sent once.
CREATE TABLE notices (
    plan_id  text NOT NULL,
    target   text NOT NULL,
    channel  text NOT NULL DEFAULT '',
    ts       text NOT NULL DEFAULT '',
    sent_at  timestamptz NOT NULL,
    PRIMARY KEY (plan_id, target)
);
CREATE TABLE notices_sent (
    event_seq bigint NOT NULL,
    target    text NOT NULL,
    sent_at   timestamptz NOT NULL,
    PRIMARY KEY (event_seq, target)
);

-- The web UI's signing secret (CSRF tokens, flash messages), shared by
-- every replica serving this store so a form made by one is accepted by
-- another, and kept across restarts.
CREATE TABLE web_secret (
    id     integer PRIMARY KEY CHECK (id = 1),
    secret text NOT NULL
);
