-- Version 4: pi's usage.cost split (input, output, cacheRead, cacheWrite,
-- in USD) next to cost_total, filled at ingest. Rows ingested before this
-- version keep them NULL; the report reads those few lines back from the
-- session file (daemon/report/reporter, CostsFromFile), so nothing needs
-- re-ingesting. Columns are appended: schema.sql lists them last too.
ALTER TABLE entries ADD COLUMN cost_input REAL;
ALTER TABLE entries ADD COLUMN cost_output REAL;
ALTER TABLE entries ADD COLUMN cost_cache_read REAL;
ALTER TABLE entries ADD COLUMN cost_cache_write REAL;
