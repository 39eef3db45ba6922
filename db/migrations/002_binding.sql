-- Version 2: the binding state behind compile, accept and release
-- (design/binding.md). Everything an accept records is written in one
-- transaction with the events that report it.

-- conversations: every conversation a host compiled in (a pi session id or
-- a host's own id). engaged_compile is the accept that engaged it (or the
-- parent's engagement for a fork); NULL while it is not engaged.
CREATE TABLE conversations (
    id                  TEXT    PRIMARY KEY,
    engaged_compile     TEXT,
    engaged_ms          INTEGER,
    parent_conversation TEXT,
    parent_branch       TEXT,
    parent_release      INTEGER NOT NULL DEFAULT 0, -- releases.id high-water when forked: the parent's releases it inherits
    session_file        TEXT,
    created_ms          INTEGER NOT NULL
) WITHOUT ROWID;

-- branches: one row per branch a compile named ('' for a host without
-- branches; for pi the leaf entry id). owner is the branch's last accepted
-- compile. The parent is read once, on the branch's first compile.
CREATE TABLE branches (
    conversation        TEXT    NOT NULL,
    branch              TEXT    NOT NULL,
    owner               TEXT,
    parent_conversation TEXT,
    parent_branch       TEXT,
    parent_release      INTEGER NOT NULL DEFAULT 0,
    created_ms          INTEGER NOT NULL,
    PRIMARY KEY (conversation, branch)
) WITHOUT ROWID;

-- compiles: the compile records (binding.CompileRecord, in db/record.go's binary form).
-- seq orders compiles and is never reused. Unaccepted compiles beyond the
-- newest kept per branch are deleted (their accept is then 404); accepted
-- ones keep their row so a repeated accept answers 200, and lose their
-- record once they are neither the owner nor among the newest.
CREATE TABLE compiles (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL UNIQUE,
    conversation TEXT    NOT NULL,
    branch       TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    accepted_ms  INTEGER,          -- NULL: not accepted
    stamped      INTEGER NOT NULL DEFAULT 0, -- what the accept recorded (answered again on a repeat)
    released     INTEGER NOT NULL DEFAULT 0,
    record       BLOB              -- NULL once forgotten (accepted compiles only)
);
CREATE INDEX compiles_branch ON compiles(conversation, branch, seq);

-- stamps: one per signed thinking block, keyed by the SHA-256 of its
-- signature (or redacted data); global, first stamp wins. entry is the pi
-- session entry that holds the reply, once the watcher has seen it land.
CREATE TABLE stamps (
    key          BLOB    PRIMARY KEY,
    seed         BLOB    NOT NULL,
    chain        BLOB    NOT NULL,
    pred         BLOB,             -- NULL: the model read no thinking block before it
    model        TEXT    NOT NULL,
    source       TEXT    NOT NULL, -- accept | prefix | file
    conversation TEXT    NOT NULL,
    branch       TEXT    NOT NULL,
    compile      TEXT,
    entry        TEXT,
    created_ms   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX stamps_conversation ON stamps(conversation);

-- releases: a branch's permanent decision never to send a block again. seq
-- is comparable with entries.seq (the ingest order at the time of the
-- release), which the fork rule for pi session trees needs.
CREATE TABLE releases (
    id           INTEGER PRIMARY KEY,
    conversation TEXT    NOT NULL,
    branch       TEXT    NOT NULL,
    key          BLOB    NOT NULL,
    reason       TEXT    NOT NULL,
    compile      TEXT,
    message      INTEGER NOT NULL DEFAULT -1,
    path         TEXT,
    seq          INTEGER NOT NULL,
    created_ms   INTEGER NOT NULL,
    UNIQUE (conversation, branch, key)
);
