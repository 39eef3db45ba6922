-- Version 5: on-demand compaction blocks bindery vouches for
-- (binding.Compaction). One row per signed compaction block a compaction
-- request's accept returned, keyed by the block's canonical digest; global
-- and first-wins, like stamps. chain is the compaction request's message
-- chain as sent (what the block replaced), seed its system + tools,
-- last_role the role of the last message it replaced.
CREATE TABLE compactions (
    key          BLOB    PRIMARY KEY,
    chain        BLOB    NOT NULL,
    seed         BLOB    NOT NULL,
    last_role    TEXT    NOT NULL,
    compile      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL
) WITHOUT ROWID;
