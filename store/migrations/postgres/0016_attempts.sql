-- Attempts of jobs that write outside refill's transactions (command,
-- Airflow): recorded before the job starts, with the key it is told, and
-- their outcome once known ('published', 'failed', or 'not_ran' when a
-- person resolved it so). An attempt left without an outcome is one whose
-- job may or may not have had its effect: a side_effects job is then never
-- started again on its own. alive_until is renewed while the job runs:
-- an attempt without an outcome whose alive_until is still to come is in
-- flight, not lost.
CREATE TABLE job_attempts (
    plan_id    text NOT NULL,
    dataset    text NOT NULL,
    partition  text NOT NULL,
    run        integer NOT NULL,
    key        text NOT NULL,
    holder     text NOT NULL,
    started_at timestamptz NOT NULL,
    alive_until timestamptz NOT NULL,
    outcome    text NOT NULL DEFAULT '',
    PRIMARY KEY (plan_id, dataset, partition, run)
);
