-- Version 14: the usage each accepted reply carried (api AcceptCall.usage),
-- for conversations that have no session file to read it from (bindery
-- proxy's, a script's): the report prices them as it prices pi's. One row
-- per accepted compile, kept when the compile's own row is forgotten by
-- retention. A NULL count: the usage did not say (or was not readable).
CREATE TABLE accept_usage (
    compile        TEXT    PRIMARY KEY,
    conversation   TEXT    NOT NULL,
    branch         TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    accepted_ms    INTEGER NOT NULL,
    input          INTEGER,
    output         INTEGER,
    cache_read     INTEGER,
    cache_write    INTEGER,          -- every cache write, 1-hour ones included
    cache_write_1h INTEGER
) WITHOUT ROWID;
CREATE INDEX accept_usage_conversation ON accept_usage(conversation, accepted_ms);
