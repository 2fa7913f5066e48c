-- Snapshot tables are dropped from the warehouse once their plan is done
-- with them and policy.snapshot_ttl has passed (or by `refill snapshot
-- drop`); the rows stay, as evidence of what was copied, marked dropped.
ALTER TABLE snapshots ADD COLUMN dropped_at TEXT;
