-- Version 3 of the shared tier: accounts team-wide (issue 29; research
-- 1.5, 3: Sonnet 5.5 and Haiku 5.5 blocks are read only in the account
-- that minted them). Fingerprints are comparable across machines only when
-- made with one salt: team_salt is the team's (the first machine to join
-- sets its own; every machine adopts it when it starts joined). A stamp
-- keeps the id of the salt its account was fingerprinted with; a machine
-- reads a stamp's account only when that is its own salt's id (a stamp
-- shipped before the machine adopted the team's salt is not compared).
-- Never a credential: a salt keys fingerprints, it is not one.
CREATE TABLE team_salt (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    salt bytea   NOT NULL
);
ALTER TABLE stamps ADD COLUMN salt_id text;
-- account_aliases: a fingerprint known to be an account (a key to its
-- organization, as the provider's anthropic-organization-id names it),
-- learned by any machine, read by every machine. The first alias of a
-- fingerprint stays, as on each machine.
CREATE TABLE account_aliases (
    id          bigserial PRIMARY KEY,
    fingerprint text   NOT NULL UNIQUE,
    account     text   NOT NULL,
    salt_id     text   NOT NULL,
    machine     text   NOT NULL,
    created_ms  bigint NOT NULL
);
