-- Version 1 of the shared tier (issue 29): the stamps every machine of a
-- team ships, so a block minted on one machine is vouched for on another.
-- A stamp is a fact: one per key (the signature's SHA-256), never changed;
-- the first shipped wins (ON CONFLICT DO NOTHING), and a batch sent twice
-- changes nothing.
CREATE TABLE stamps (
    key          bytea  PRIMARY KEY,
    seed         bytea  NOT NULL,
    chain        bytea  NOT NULL,
    pred         bytea,           -- NULL: the model read no thinking block before it
    model        text   NOT NULL,
    account      text,            -- the minting credential's salted fingerprint; NULL: unknown
    source       text   NOT NULL, -- accept | prefix | file, as the machine recorded it
    conversation text   NOT NULL,
    branch       text   NOT NULL,
    compile      text,
    machine      text   NOT NULL, -- which machine shipped it
    created_ms   bigint NOT NULL, -- when that machine recorded it
    shipped      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stamps_machine ON stamps (machine, shipped);
