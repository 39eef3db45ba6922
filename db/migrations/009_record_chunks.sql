-- Version 9: long compile records stored in chunks (db/record_chunks.go).
-- A record holds the conversation's whole sent history, which the next
-- compile's record repeats; a record of 128 sent messages or more is now
-- stored as the hashes of its 64-message chunks and what follows them
-- (record format 3), each chunk once per conversation, here. Records
-- stored before keep their formats and read as before; nothing is
-- rewritten. A chunk no remembered record names is deleted by the sweep
-- that follows retention.
CREATE TABLE record_chunks (
    conversation TEXT NOT NULL,
    hash         BLOB NOT NULL, -- SHA-256 of data
    data         BLOB NOT NULL,
    PRIMARY KEY (conversation, hash)
) WITHOUT ROWID;
