-- Plans carry attention (what else keeps them from auto), sealed in their
-- hash when present. Nothing changes in the tables: this version tells an
-- older refill, which would take such a plan for one altered in the store,
-- to stop and ask for an upgrade.
SELECT 1;
