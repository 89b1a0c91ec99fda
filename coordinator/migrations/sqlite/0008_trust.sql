-- The pool's trust boundary (issue 27). Same text in both dialects.
-- What each machine says it has (logical CPUs: what its CPU-seconds are checked against),
-- when each task's current lease was assigned (what its completion's CPU time is checked
-- against), and which records count for the pool (those made before the machine joined
-- are kept but not counted).
ALTER TABLE agents ADD COLUMN cpus BIGINT;
ALTER TABLE tasks ADD COLUMN leased_ms BIGINT;
ALTER TABLE records ADD COLUMN counted BIGINT NOT NULL DEFAULT 1;
CREATE INDEX records_agent_day ON records(agent_id, day);
-- Join tokens and API keys can be listed and revoked; a token keeps how many uses it
-- was made with. Each use of a token (an enrolment, or one refused) is kept with its
-- time and address; each API key's uses are counted per address.
ALTER TABLE join_tokens ADD COLUMN uses BIGINT;
ALTER TABLE join_tokens ADD COLUMN revoked_ms BIGINT;
ALTER TABLE api_keys ADD COLUMN revoked_ms BIGINT;
CREATE TABLE token_uses (
    token_hash TEXT NOT NULL, at_ms BIGINT NOT NULL, addr TEXT NOT NULL, outcome TEXT NOT NULL,
    agent_id TEXT, owner TEXT, machine TEXT);
CREATE INDEX token_uses_token ON token_uses(token_hash, at_ms);
CREATE TABLE key_uses (
    key_hash TEXT NOT NULL, addr TEXT NOT NULL, first_ms BIGINT NOT NULL, last_ms BIGINT NOT NULL, uses BIGINT NOT NULL,
    PRIMARY KEY (key_hash, addr));
-- An agent secret that stopped working, and why (`replaced` by a new enrolment, or
-- `removed` with its machine), so the agent holding it is told instead of "unknown".
CREATE TABLE retired_secrets (
    secret_hash TEXT PRIMARY KEY, agent_id TEXT NOT NULL, reason TEXT NOT NULL, at_ms BIGINT NOT NULL, addr TEXT NOT NULL);
