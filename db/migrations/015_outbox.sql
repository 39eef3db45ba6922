-- Version 15: the outbox of the shared tier (issue 29). With `bindery
-- serve --shared`, every stamp this machine records (but those it read
-- from the shared tier) gets a row here in the same transaction, and the
-- shipper sends them to PostgreSQL in idempotent batches, deleting the
-- rows it shipped. A machine offline keeps its rows until it is back.
-- outbox_joined says when the machine first joined: the stamps it held
-- then were queued once, that day.
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL, -- 'stamp'
    key        BLOB    NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE outbox_joined (
    joined_ms INTEGER NOT NULL
);
