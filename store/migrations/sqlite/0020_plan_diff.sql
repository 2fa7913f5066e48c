-- Plans carry each partition's content diff (what the rebuild changes, as
-- the dry run's rehearsal found it), sealed in their hash. Nothing changes
-- in the tables: this version tells an older refill, which would take such
-- a plan for one altered in the store, to stop and ask for an upgrade.
SELECT 1;
