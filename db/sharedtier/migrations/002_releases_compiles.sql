-- Version 2 of the shared tier (issue 29): what needs one order across a
-- team's machines and gateway replicas.
--
-- releases: a branch's permanent decision never to send a block again.
-- ord is the team's one order of releases: writers of one conversation
-- take a transaction-scoped advisory lock on it (PutReleases), so within a
-- conversation ords commit in increasing order and a reader that has seen
-- ord N never later finds a smaller one committed (a bare bigserial can
-- commit out of order). A release is a fact: the first of a (conversation,
-- branch, key) wins and a batch sent twice changes nothing.
CREATE TABLE releases (
    ord          bigserial PRIMARY KEY,
    conversation text    NOT NULL,
    branch       text    NOT NULL,
    key          bytea   NOT NULL,
    reason       text    NOT NULL,
    compile      text,
    message      integer NOT NULL DEFAULT -1,
    path         text,
    machine      text    NOT NULL, -- which machine decided it
    created_ms   bigint  NOT NULL,
    UNIQUE (conversation, branch, key)
);
CREATE INDEX releases_conversation ON releases (conversation, ord);

-- compiles: every real compile a machine made, so an accept that reaches
-- another machine (a gateway replica behind a balancer, a laptop that took
-- over) finds its record. The record is bindery's own encoding (db's
-- record format, whole), never changed once shipped.
CREATE TABLE compiles (
    id           text   PRIMARY KEY,
    conversation text   NOT NULL,
    branch       text   NOT NULL,
    machine      text   NOT NULL,
    record       bytea  NOT NULL,
    created_ms   bigint NOT NULL,
    ord          bigserial
);
CREATE INDEX compiles_conversation ON compiles (conversation, ord);

-- accepts: a compile accepted on any machine; the first accept wins, so
-- an accept repeated on another machine records nothing twice.
CREATE TABLE accepts (
    compile      text    PRIMARY KEY,
    conversation text    NOT NULL,
    branch       text    NOT NULL,
    machine      text    NOT NULL,
    stamped      integer NOT NULL DEFAULT 0,
    released     integer NOT NULL DEFAULT 0,
    accepted_ms  bigint  NOT NULL
);

-- branch_owners: a branch's owner (its last accepted compile) decided in
-- one order: an accept takes the ownership only from an owner whose compile
-- was shipped before its own (compiles.ord), whichever machine accepts.
CREATE TABLE branch_owners (
    conversation text   NOT NULL,
    branch       text   NOT NULL,
    owner        text   NOT NULL,
    owner_ord    bigint NOT NULL,
    PRIMARY KEY (conversation, branch)
);
