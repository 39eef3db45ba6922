-- Version 11: one index finds a file's thinking blocks, not two. Every
-- block went into thinking_file (file) and, when signed, into
-- thinking_file_sig (file, sig_digest): at a cold ingest, an index write
-- per block bought nothing. thinking_file_sig, now over every block, is
-- the one: a lookup by digest within a session's files uses it as before
-- (file=? AND sig_digest=?), a file's blocks (a rewrite clearing them, a
-- report reading them, a file's foreign key) by its first column. A
-- partial index could not serve those: it holds only signed blocks.
DROP INDEX thinking_file;
DROP INDEX thinking_file_sig;
CREATE INDEX thinking_file_sig ON thinking(file, sig_digest);
