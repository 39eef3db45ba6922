-- Version 13: account-bound thinking (issue 30; research 1.5, 3: Sonnet 5.5
-- and Haiku 5.5 blocks are read only in the account that minted them).
-- A stamp records the salted fingerprint of the credential its minting
-- request was sent under; NULL: unknown (every stamp written before this
-- version, pi's sessions, a host that sends none), never compared.
-- Columns are appended: schema.sql lists it last too.
ALTER TABLE stamps ADD COLUMN account TEXT;
-- salts holds the store's own random salts, made once (db/salt.go): the
-- account salt keys the fingerprints, so a fingerprint tells credentials
-- apart without being a hash anyone could test a guessed key against
-- elsewhere. Never a credential.
CREATE TABLE salts (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) WITHOUT ROWID;
-- account_aliases: a fingerprint known to belong to an account (a key to
-- its organization, as the provider's anthropic-organization-id names it,
-- fingerprinted too), so two keys of one organization are one account.
CREATE TABLE account_aliases (
    fingerprint TEXT PRIMARY KEY,
    account     TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL
) WITHOUT ROWID;
