-- Version 10: the index that finds a thinking block by its signature's
-- digest leads with the file. Every lookup by digest is within one
-- session's files (db.BlockEntries, the stamp links: sig_digest = ? AND
-- sessions.id = ?), and a digest is random: keyed by the digest alone,
-- each block ingested landed on a random page of the index, so every
-- commit of a first scan rewrote most of the index's pages (measured: 15 to
-- 20% of a cold ingest's database time over 100 MB, growing with the
-- archive). Keyed by (file, digest), a new file's blocks go to the end of
-- the index, and a lookup finds the session's files first (sessions_id),
-- then each file's block.
DROP INDEX thinking_sig;
CREATE INDEX thinking_file_sig ON thinking(file, sig_digest) WHERE sig_digest IS NOT NULL;
