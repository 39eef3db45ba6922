-- Version 17: the team report's facts (issue 29). With `bindery serve
-- --shared`, every request the report counts (a pi session's request on
-- its branch, a host conversation's accepted reply) is summed into one
-- fact per request: its tokens, its spend in integer micro-USD, its cache
-- break. team_facts holds the fact as last queued (so an unchanged one is
-- not queued again, and one that left the branch is retracted with a zero
-- fact); team_outbox queues a key in the same transaction as its fact and
-- is deleted once shipped; team_scan remembers, per scope (a session id,
-- or 'host:' for the host conversations' accepts), what was scanned.
CREATE TABLE team_facts (
    key   TEXT    PRIMARY KEY,  -- 'pi:<session>/<entry id>' | 'host:<compile>'
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
    stamp TEXT NOT NULL         -- the report's stamp of the session, or the last accept_usage rowid
) WITHOUT ROWID;
