-- Version 16: the shared tier's outbox for facts other than stamps (issue
-- 29): compile records, accepts and releases this machine made, queued in
-- the same transaction as the fact (so one is never recorded without being
-- queued, nor queued without being recorded), shipped in id order by the
-- shipper and deleted once shipped. ref names the fact in this store
-- (compiles.id, or releases.id for a release): the shipper reads it when
-- it ships, so a long compile record is not written twice here. A fact
-- gone by then (a record retention forgot) ships nothing.
CREATE TABLE outbox_facts (
    id         INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL, -- 'compile' | 'accept' | 'release'
    ref        TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);
