-- Attempts of jobs that write outside refill's transactions (command,
-- Airflow): recorded before the job starts, with the key it is told, and
-- their outcome once known ('published', 'failed', or 'not_ran' when a
-- person resolved it so). An attempt left without an outcome is one whose
-- job may or may not have had its effect: a side_effects job is then never
-- started again on its own. alive_until is renewed while the job runs:
-- an attempt without an outcome whose alive_until is still to come is in
-- flight, not lost.
CREATE TABLE job_attempts (
    plan_id    TEXT NOT NULL,
    dataset    TEXT NOT NULL,
    partition  TEXT NOT NULL,
    run        INTEGER NOT NULL,
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    started_at TEXT NOT NULL,
    alive_until TEXT NOT NULL,
    outcome    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (plan_id, dataset, partition, run)
) STRICT;
