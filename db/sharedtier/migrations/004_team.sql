-- Version 4 of the shared tier (issue 29): the team report. Each machine
-- ships one fact per request the report counts (db.TeamFact: tokens by
-- kind, spend in integer micro-USD, its cache break), keyed by the
-- request's key, which means the same on every machine: the first machine
-- to ship a key owns it (a session continued from synced files on a second
-- machine is counted once). A fact may change (a branch moved, a break's
-- cause learned from a compile) and is replaced only by its owner's of a
-- higher rev, so a batch sent twice or late changes nothing. team_rollup holds the sums per
-- day, machine, person, client and model, kept in the same transaction as
-- the facts (the old fact's figures subtracted, the new one's added): the
-- report reads the rollups, never the requests.
CREATE TABLE team_requests (
    machine        text   NOT NULL, -- the machine that shipped it first: its owner
    key            text   NOT NULL, -- 'pi:<session>/<entry id>' | 'host:<machine>/<compile>'
    rev            bigint NOT NULL,
    person         text   NOT NULL,
    client         text   NOT NULL,
    day            date   NOT NULL, -- the request's UTC day
    model          text   NOT NULL,
    requests       bigint NOT NULL, -- 1, or 0: retracted
    errored        bigint NOT NULL,
    input          bigint NOT NULL,
    output         bigint NOT NULL,
    cache_read     bigint NOT NULL,
    cache_write    bigint NOT NULL,
    cache_write_1h bigint NOT NULL,
    spend_input    bigint NOT NULL, -- micro-USD, here and below
    spend_output   bigint NOT NULL,
    spend_read     bigint NOT NULL,
    spend_write    bigint NOT NULL,
    spend_other    bigint NOT NULL,
    unpriced       bigint NOT NULL,
    breaks         bigint NOT NULL,
    rewritten      bigint NOT NULL, -- tokens
    break_cost     bigint NOT NULL,
    excess         bigint NOT NULL,
    avoidable      bigint NOT NULL,
    shipped        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key)
);
CREATE TABLE team_rollup (
    day            date   NOT NULL,
    machine        text   NOT NULL,
    person         text   NOT NULL,
    client         text   NOT NULL,
    model          text   NOT NULL,
    requests       bigint NOT NULL,
    errored        bigint NOT NULL,
    input          bigint NOT NULL,
    output         bigint NOT NULL,
    cache_read     bigint NOT NULL,
    cache_write    bigint NOT NULL,
    cache_write_1h bigint NOT NULL,
    spend_input    bigint NOT NULL,
    spend_output   bigint NOT NULL,
    spend_read     bigint NOT NULL,
    spend_write    bigint NOT NULL,
    spend_other    bigint NOT NULL,
    unpriced       bigint NOT NULL,
    breaks         bigint NOT NULL,
    rewritten      bigint NOT NULL,
    break_cost     bigint NOT NULL,
    excess         bigint NOT NULL,
    avoidable      bigint NOT NULL,
    PRIMARY KEY (day, machine, person, client, model)
);
