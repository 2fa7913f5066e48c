-- Audit entries carry the real clock in at; as_of keeps the caller's clock
-- (REFILL_NOW) when it differed, and is NULL otherwise, as it is for every
-- entry written before this migration, whose hashes therefore still hold.
ALTER TABLE audit_log ADD COLUMN as_of timestamptz;

-- keyed_from is the first entry hashed with the audit key (HMAC-SHA256).
-- Entries before it are the unkeyed chain of an install that predates keys;
-- entries from it on must all be keyed. NULL until a key is first used.
ALTER TABLE audit_head ADD COLUMN keyed_from bigint;

-- The entry up to which the chain was last verified, so that the check
-- before each write reads only the entries after it. mac binds seq and hash
-- under the audit key (a plain hash when there is none), so the checkpoint
-- cannot be moved past an altered entry by someone without the key.
CREATE TABLE audit_checkpoint (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash text NOT NULL,
    mac  text NOT NULL
);
