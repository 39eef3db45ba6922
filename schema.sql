-- bindery's SQLite schema: the complete schema of a new database.
--
-- A database made by an earlier release is brought up to this by the
-- forward-only steps in db/migrations/NNN_*.sql; db's parity test checks that
-- version 1 plus every step gives exactly this schema. Change both together.
--
-- What is stored: where each line of a session file is (offset, length), the
-- few fields bindery decides on, and digests of thinking signatures. Never a
-- copy of a message: the session files stay the only copy of the text.
--
-- Times written by bindery are INTEGER unix milliseconds; timestamps copied
-- from session files stay TEXT as pi wrote them (ISO-8601, UTC).

-- files: one row per session file ever seen, holding the watcher's cursor.
-- The cursor is updated in the same transaction as the rows it produced, so
-- a restart resumes exactly after the last committed line.
CREATE TABLE files (
    id           INTEGER PRIMARY KEY,
    path         TEXT    NOT NULL,
    dev          INTEGER NOT NULL,
    ino          INTEGER NOT NULL,
    offset       INTEGER NOT NULL, -- end of the last complete line ingested
    lines        INTEGER NOT NULL, -- complete lines ingested (the header is line 1)
    check_digest BLOB,             -- the watcher's digest of the bytes before offset
    removed      INTEGER NOT NULL DEFAULT 0, -- 1: the file is gone; its rows are kept
    updated_ms   INTEGER NOT NULL
);
-- At most one live row per path; removed files keep theirs.
CREATE UNIQUE INDEX files_live_path ON files(path) WHERE removed = 0;

-- sessions: a file's header line and counters kept current at ingest, so
-- listing every session reads one row each.
CREATE TABLE sessions (
    file           INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    id             TEXT    NOT NULL, -- pi's session id (header id)
    cwd            TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    parent_session TEXT,             -- header parentSession (v1 branchedFrom)
    header_time    TEXT,
    removed        INTEGER NOT NULL DEFAULT 0,
    entries        INTEGER NOT NULL DEFAULT 0,
    thinking       INTEGER NOT NULL DEFAULT 0, -- thinking blocks in the file
    leaf           TEXT,             -- pi's current leaf: the last entry in file order
    last_activity  TEXT              -- timestamp of the last entry (else the header's)
);
CREATE INDEX sessions_id ON sessions(id);

-- entries: one row per parsed non-header line. seq is bindery's own ingest
-- order; within a file it is also file order.
CREATE TABLE entries (
    seq          INTEGER PRIMARY KEY,
    file         INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    id           TEXT    NOT NULL,
    parent_id    TEXT,
    type         TEXT    NOT NULL,
    line         INTEGER NOT NULL,
    offset       INTEGER NOT NULL,
    length       INTEGER NOT NULL,
    timestamp    TEXT,
    role         TEXT,
    model        TEXT,
    provider     TEXT,
    stop_reason  TEXT,
    input_tokens       INTEGER,
    output_tokens      INTEGER,
    cache_read_tokens  INTEGER,
    cache_write_tokens INTEGER,
    total_tokens       INTEGER,
    cost_total         REAL,
    tool_calls   INTEGER NOT NULL DEFAULT 0,
    user_text    INTEGER NOT NULL DEFAULT 0,
    first_kept_entry_id TEXT,
    custom_type  TEXT,
    -- pi's usage.cost split, USD (version 4; NULL in rows ingested before)
    cost_input       REAL,
    cost_output      REAL,
    cost_cache_read  REAL,
    cost_cache_write REAL,
    -- pi 1.6 (version 6): usage.cacheWrite1h and usage.reasoning; a usage
    -- entry's kind; a context_edit's target and whether it omits it
    cache_write_1h_tokens INTEGER,
    reasoning_tokens      INTEGER,
    usage_kind            TEXT,
    target_id             TEXT,
    edit_omit             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX entries_file_id ON entries(file, id);
-- entries_file is (file, seq): one file's entries in file order, without a sort.
CREATE INDEX entries_file ON entries(file);

-- thinking: every thinking block of an assistant message. The signature
-- itself stays in the file; its SHA-256 is enough to recognise it.
CREATE TABLE thinking (
    entry      INTEGER NOT NULL REFERENCES entries(seq) ON DELETE CASCADE,
    block      INTEGER NOT NULL, -- index in the message's content array
    file       INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    redacted   INTEGER NOT NULL,
    signed     INTEGER NOT NULL,
    sig_digest BLOB,
    chars      INTEGER NOT NULL,
    PRIMARY KEY (entry, block)
) WITHOUT ROWID;
-- A block is looked up by digest within a session's files: keyed by file
-- first, a new file's blocks are appended, not spread over the index
-- (migration 010). It is also the index of a file's blocks, signed or not
-- (migration 011).
CREATE INDEX thinking_file_sig ON thinking(file, sig_digest);

-- frontier: pi-condense's context-prune-frontier custom entries, their data
-- verbatim (a small object). The frontier of a branch is the last one on it.
CREATE TABLE frontier (
    entry INTEGER PRIMARY KEY REFERENCES entries(seq) ON DELETE CASCADE,
    file  INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    data  TEXT    NOT NULL
);
CREATE INDEX frontier_file ON frontier(file);

-- ingest_errors: lines bindery could not use, skipped and kept on record.
CREATE TABLE ingest_errors (
    id      INTEGER PRIMARY KEY,
    file    INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    line    INTEGER NOT NULL,
    offset  INTEGER NOT NULL,
    reason  TEXT    NOT NULL,
    time_ms INTEGER NOT NULL
);
CREATE INDEX ingest_errors_file ON ingest_errors(file);

-- events: the durable, bounded event log behind GET /v1/events.
-- AUTOINCREMENT so a seq is never reused, even after the newest rows are
-- pruned or the daemon restarts.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms      INTEGER NOT NULL,
    type         TEXT    NOT NULL,
    conversation TEXT    NOT NULL DEFAULT '',
    fields       TEXT    NOT NULL DEFAULT '{}' -- a JSON object of the type's fields
);
CREATE INDEX events_conversation ON events(conversation, seq);

-- The binding state (migrations/002_binding.sql): see that file for what each table holds.
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
CREATE TABLE compiles (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL UNIQUE,
    conversation TEXT    NOT NULL,
    branch       TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    accepted_ms  INTEGER,          -- NULL: not accepted
    stamped      INTEGER NOT NULL DEFAULT 0, -- what the accept recorded (answered again on a repeat)
    released     INTEGER NOT NULL DEFAULT 0,
    record       BLOB,             -- NULL once forgotten (accepted compiles only)
    last_read    BLOB              -- the accept's LastRead (migration 008), all zero: none; NULL: record says (accepted before 008, or not accepted)
);
CREATE INDEX compiles_branch ON compiles(conversation, branch, seq);
CREATE TABLE record_chunks (
    conversation TEXT NOT NULL,
    hash         BLOB NOT NULL, -- SHA-256 of data (migration 009)
    data         BLOB NOT NULL,
    PRIMARY KEY (conversation, hash)
) WITHOUT ROWID;
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
    created_ms   INTEGER NOT NULL,
    account      TEXT              -- the minting credential's salted fingerprint (migration 013); NULL: unknown
) WITHOUT ROWID;
CREATE INDEX stamps_conversation ON stamps(conversation);
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

-- compactions: on-demand compaction blocks bindery vouches for
-- (binding.Compaction; migration 005): keyed by the block's canonical digest,
-- first-wins. chain: the compaction request's message chain as sent (what
-- the block replaced); seed: its system + tools; last_role: the role of the
-- last message it replaced.
CREATE TABLE compactions (
    key          BLOB    PRIMARY KEY,
    chain        BLOB    NOT NULL,
    seed         BLOB    NOT NULL,
    last_role    TEXT    NOT NULL,
    compile      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    through      BLOB              -- Compaction.Through (migration 012): 32-byte digests, nearest first; NULL: none
) WITHOUT ROWID;

-- report_summaries: bindery report's per-session summary cache (migration
-- 003). One row per session file: its summary (JSON) and the stamp it is
-- valid under (ingest progress, compile events, price table, format).
CREATE TABLE report_summaries (
    file       INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    stamp      TEXT    NOT NULL,
    summary    TEXT    NOT NULL,
    updated_ms INTEGER NOT NULL
);

-- report_aggregates: every session's report aggregate (migration 007),
-- kept current inside the ingest transaction so a report reads one row per
-- session, not every entry. sums (read by the report) and walk (read only
-- to extend it) are daemon/report's Aggregate (Encode); fresh = 1 when the
-- file's rows alone rebuild it.
CREATE TABLE report_aggregates (
    file       INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    sums       TEXT    NOT NULL,
    walk       TEXT    NOT NULL,
    fresh      INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
-- report_breaks: each aggregate's cache breaks, one row each in walk order
-- (id), so an append adds its new ones without rewriting the earlier.
CREATE TABLE report_breaks (
    id   INTEGER PRIMARY KEY,
    file INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    data TEXT    NOT NULL
);
CREATE INDEX report_breaks_file ON report_breaks(file);
CREATE TABLE salts (
    name  TEXT PRIMARY KEY,        -- "account": the account fingerprint salt (db/salt.go)
    value BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE account_aliases (
    fingerprint TEXT PRIMARY KEY,  -- a credential's fingerprint (api.AccountFingerprint)
    account     TEXT    NOT NULL,  -- the account it belongs to: its organization's fingerprint
    created_ms  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE accept_usage (
    compile        TEXT    PRIMARY KEY,
    conversation   TEXT    NOT NULL,
    branch         TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    accepted_ms    INTEGER NOT NULL,
    input          INTEGER,          -- NULL: the usage did not say (migration 014)
    output         INTEGER,
    cache_read     INTEGER,
    cache_write    INTEGER,          -- every cache write, 1-hour ones included
    cache_write_1h INTEGER
) WITHOUT ROWID;
CREATE INDEX accept_usage_conversation ON accept_usage(conversation, accepted_ms);
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY,  -- the shared tier's outbox (migration 015, db/outbox.go)
    kind       TEXT    NOT NULL,     -- 'stamp'
    key        BLOB    NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE outbox_joined (
    joined_ms INTEGER NOT NULL
);

CREATE TABLE outbox_facts (
    id         INTEGER PRIMARY KEY,  -- the shared tier's outbox of facts (migration 016, db/outbox_facts.go)
    kind       TEXT    NOT NULL,     -- 'compile' | 'accept' | 'release'
    ref        TEXT    NOT NULL,     -- compiles.id, or releases.id for a release
    created_ms INTEGER NOT NULL
);
CREATE TABLE team_facts (
    key   TEXT    PRIMARY KEY,  -- the team report's facts (migration 017, db/teamfacts.go)
    scope TEXT    NOT NULL,     -- the session id, or 'host:'
    rev   INTEGER NOT NULL,     -- increases at every change; the tier keeps the highest
    fact  TEXT    NOT NULL      -- JSON (db.TeamFact)
) WITHOUT ROWID;
CREATE INDEX team_facts_scope ON team_facts(scope);
CREATE TABLE team_outbox (
    id  INTEGER PRIMARY KEY,
    key TEXT    NOT NULL
);
CREATE TABLE team_scan (
    scope TEXT PRIMARY KEY,
    stamp TEXT NOT NULL
) WITHOUT ROWID;
