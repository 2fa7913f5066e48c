-- Before 0007 a dataset's drift was judged against the latest schema any
-- plan saw; 0007 left every snapshot unaccepted, which made the first
-- schema ever recorded the baseline. The newest snapshot recorded before
-- 0007 becomes the accepted baseline of each dataset that has none, as it
-- was before the upgrade. Snapshots recorded since 0007 are left alone:
-- seeing a schema must never move the baseline, so on a store created at
-- 0007 or later this changes nothing.
UPDATE schema_snapshots
SET accepted_by = '(upgrade)',
    reason = 'the latest schema seen before drift baselines had to be accepted'
WHERE id IN (
        SELECT max(id) FROM schema_snapshots
        WHERE julianday(recorded_at) < (SELECT julianday(applied_at) FROM refill_migrations WHERE version = 7)
        GROUP BY dataset)
    AND dataset NOT IN (SELECT dataset FROM schema_snapshots WHERE accepted_by IS NOT NULL);
