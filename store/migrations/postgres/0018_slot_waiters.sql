-- Slot waiters: partition jobs waiting for one of their dataset's slots,
-- in any process, in the order they began to wait. A slot that frees goes
-- to the oldest live waiter, so a worker is not starved by the process
-- that just gave a slot back and asks again at once. since is when the
-- partition began to wait (kept while its job is snoozed and fetched
-- again); alive_until is renewed each time it asks, so a waiter that
-- stopped asking drops out on its own.
CREATE TABLE slot_waiters (
    dataset text NOT NULL,
    key     text NOT NULL,
    process text NOT NULL,
    since   timestamptz NOT NULL,
    alive_until timestamptz NOT NULL,
    PRIMARY KEY (dataset, key)
);
