-- The shared tier's schema, version 1. Every table holds facts that merge
-- without conflict: each row is keyed by an id every machine derives the
-- same way, so a batch shipped twice, or by two machines, inserts nothing
-- the second time (INSERT ... ON CONFLICT DO NOTHING).

-- stamps: the prefix a signed thinking block was minted under, by the
-- block's signature digest (binding.Stamp): what a compile on any machine
-- needs to vouch for the block.
CREATE TABLE stamps (
    key          bytea  PRIMARY KEY CHECK (length(key) = 32),
    seed         bytea  NOT NULL CHECK (length(seed) = 32),
    chain        bytea  NOT NULL CHECK (length(chain) = 32),
    pred         bytea  CHECK (pred IS NULL OR length(pred) = 32), -- NULL: the model read no thinking block before it
    model        text   NOT NULL,
    source       text   NOT NULL, -- accept | prefix | file
    conversation text   NOT NULL,
    branch       text   NOT NULL,
    compile      text,
    entry        text,
    created_ms   bigint NOT NULL,
    machine      text   NOT NULL, -- the machine that shipped it first
    shipped_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stamps_conversation ON stamps(conversation);

-- compiles: every compile a machine made, by its id (compile ids are
-- unique across machines: they carry the machine's random prefix).
CREATE TABLE compiles (
    id           text   PRIMARY KEY,
    conversation text   NOT NULL,
    branch       text   NOT NULL,
    created_ms   bigint NOT NULL,
    machine      text   NOT NULL,
    shipped_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX compiles_conversation ON compiles(conversation, branch);

-- accepts: a compile's accept, once (a compile is accepted at most once).
CREATE TABLE accepts (
    compile      text   PRIMARY KEY,
    accepted_ms  bigint NOT NULL,
    stamped      integer NOT NULL,
    released     integer NOT NULL,
    machine      text   NOT NULL,
    shipped_at   timestamptz NOT NULL DEFAULT now()
);
