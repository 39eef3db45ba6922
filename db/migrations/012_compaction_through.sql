-- Version 12: a compaction's Through (binding.Compaction.Through): when the
-- compaction request itself began with an earlier compaction block bindery
-- vouched for, the chains of what the block replaced with each compaction
-- of that row expanded, nearest first, so a turn kept through several
-- compactions in a row is vouched for (issue 31). The 32-byte digests one
-- after another; NULL: none (every row written before this version: its
-- kept turns are vouched for through that one compaction, as they were).
-- Columns are appended: schema.sql lists it last too.
ALTER TABLE compactions ADD COLUMN through BLOB;
