-- Plans carry the request's selectors (select, exclude, no_downstream) and
-- the datasets they leave out that read what the plan rewrites (left_out),
-- sealed in their hash; this version also tells an older refill, which
-- would take such a plan for one altered in the store, to stop and ask for
-- an upgrade. selection is the selectors as the request gave them ('' for
-- dataset names alone): a newer plan supersedes an older one only of the
-- same targets, range and selection.
ALTER TABLE plans ADD COLUMN selection TEXT NOT NULL DEFAULT '';
