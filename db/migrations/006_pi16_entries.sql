-- Version 6: pi 1.6's session entries. usage gains cacheWrite1h (the part
-- of cacheWrite written with the 1-hour TTL) and reasoning (the part of
-- output that was thinking); a usage entry (cache-warm spend) names its
-- kind; a context_edit names the entry it edits and whether it omits it
-- (replacement null). Rows ingested before keep them NULL / 0; the report
-- reads those few lines back from the session file (daemon/report/reporter,
-- Pi16FromFile), so nothing needs re-ingesting.
-- Columns are appended: schema.sql lists them last too.
ALTER TABLE entries ADD COLUMN cache_write_1h_tokens INTEGER;
ALTER TABLE entries ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE entries ADD COLUMN usage_kind TEXT;
ALTER TABLE entries ADD COLUMN target_id TEXT;
ALTER TABLE entries ADD COLUMN edit_omit INTEGER NOT NULL DEFAULT 0;
