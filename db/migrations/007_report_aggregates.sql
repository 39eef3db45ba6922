-- Version 7: bindery report's per-session aggregates (daemon/report's
-- Aggregate), kept current inside the ingest transaction: a batch that
-- extends a file's branch extends its row, a first scan or a rewrite builds
-- it from the batch, so a report reads one row per session instead of every
-- entry. sums (JSON) is what the report reads, walk what extending needs
-- (the walk's state: a JSON head, then the branch's ids and resident turns
-- verbatim); the breaks are report_breaks rows. fresh = 1: built from rows
-- as this release ingests them, so the rows alone rebuild it when the branch
-- moves; 0: built by a report that read older rows back from the session
-- file, so it is dropped instead and the next report rebuilds it.
-- Nothing is backfilled here (SQL cannot run the walk): a session ingested
-- before this version gets its row from the first report that analyses it
-- (daemon/report/reporter), and from then on ingest keeps it current.
CREATE TABLE report_aggregates (
    file       INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    sums       TEXT    NOT NULL,
    walk       TEXT    NOT NULL,
    fresh      INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);

-- report_breaks: the cache breaks of each aggregate's walk, one row each in
-- walk order (rowid), so an append adds its new breaks without reading or
-- rewriting the session's earlier ones.
CREATE TABLE report_breaks (
    id   INTEGER PRIMARY KEY,
    file INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    data TEXT    NOT NULL
);
CREATE INDEX report_breaks_file ON report_breaks(file);
