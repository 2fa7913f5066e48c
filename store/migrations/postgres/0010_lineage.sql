-- Input -> output edges reported by OpenLineage RunEvents (POST
-- /api/v1/lineage): which job read what and wrote what, by namespace and
-- name as the producer gave them. One row per edge and job, keyed by a
-- digest of those six names (they may be long: a file path, a URL), with
-- the event times it was first and last seen and the producer of the
-- latest event. Reporting an edge again only widens its seen window.
CREATE TABLE lineage_edges (
    edge_key         text PRIMARY KEY,
    input_namespace  text NOT NULL,
    input_name       text NOT NULL,
    output_namespace text NOT NULL,
    output_name      text NOT NULL,
    job_namespace    text NOT NULL,
    job_name         text NOT NULL,
    producer         text NOT NULL,
    first_seen       timestamptz NOT NULL,
    last_seen        timestamptz NOT NULL
);
