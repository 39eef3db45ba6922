-- Version 3: bindery report's per-session summary cache (daemon/report).
-- A row is one session file's report summary (JSON), valid while its stamp
-- matches: the stamp covers the file's ingest progress, the compile events
-- seen for the session, the price table and the summary format. A stale
-- row is recomputed from the entries and replaced; losing every row costs
-- only a recomputation.
CREATE TABLE report_summaries (
    file       INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    stamp      TEXT    NOT NULL,
    summary    TEXT    NOT NULL,
    updated_ms INTEGER NOT NULL
);
