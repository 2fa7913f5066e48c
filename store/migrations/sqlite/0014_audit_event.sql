-- The ledger (store/ledger.go) reads audit entries by their kind: which
-- entries made or ended the rows that change decisions.
CREATE INDEX audit_log_event ON audit_log (event, seq);
