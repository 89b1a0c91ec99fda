-- Lull coordinator schema, PostgreSQL dialect. Keep in step with ../sqlite/0001_init.sql:
-- the two differ only where the dialects do (auto-increment ids, byte strings).
CREATE TABLE api_keys (key_hash TEXT PRIMARY KEY, role TEXT NOT NULL, owner TEXT, created_ms BIGINT NOT NULL);
CREATE TABLE join_tokens (token_hash TEXT PRIMARY KEY, uses_left BIGINT NOT NULL, expires_ms BIGINT NOT NULL, created_ms BIGINT NOT NULL);
CREATE TABLE agents (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE,
    enrolled_ms BIGINT NOT NULL, last_seen_ms BIGINT, state TEXT, available BIGINT, budget_left BIGINT,
    free_mem_bytes BIGINT, base_speed DOUBLE PRECISION, current_speed DOUBLE PRECISION);
CREATE INDEX agents_owner ON agents(owner);
CREATE TABLE jobs (
    id BIGSERIAL PRIMARY KEY, submitter TEXT NOT NULL, program TEXT NOT NULL, spec TEXT NOT NULL,
    mem_bytes BIGINT NOT NULL, checkpointable BIGINT NOT NULL, gang BIGINT NOT NULL, max_retries BIGINT NOT NULL,
    state TEXT NOT NULL, created_ms BIGINT NOT NULL, finished_ms BIGINT);
CREATE INDEX jobs_submitter ON jobs(submitter, id);
CREATE TABLE tasks (
    job_id BIGINT NOT NULL, rank BIGINT NOT NULL, state TEXT NOT NULL, agent_id TEXT,
    lease_epoch BIGINT NOT NULL DEFAULT 0, lease_expires_ms BIGINT, attempts BIGINT NOT NULL DEFAULT 0,
    max_retries BIGINT NOT NULL, evictions BIGINT NOT NULL DEFAULT 0, mem_bytes BIGINT NOT NULL,
    exit_code BIGINT, user_cpu_s DOUBLE PRECISION, sys_cpu_s DOUBLE PRECISION, finished_ms BIGINT,
    PRIMARY KEY (job_id, rank));
CREATE INDEX tasks_queue ON tasks(state, job_id, rank);
CREATE INDEX tasks_agent ON tasks(agent_id, state);
CREATE TABLE task_events (
    job_id BIGINT NOT NULL, rank BIGINT NOT NULL, lease_epoch BIGINT NOT NULL, kind TEXT NOT NULL,
    agent_id TEXT NOT NULL, day TEXT NOT NULL, at_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, rank, lease_epoch, kind));
CREATE INDEX task_events_day ON task_events(day);
CREATE TABLE checkpoints (job_id BIGINT NOT NULL, rank BIGINT NOT NULL, data BYTEA NOT NULL, updated_ms BIGINT NOT NULL, PRIMARY KEY (job_id, rank));
CREATE TABLE records (
    agent_id TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL, day TEXT NOT NULL,
    cpu_us BIGINT NOT NULL, wall_ms BIGINT NOT NULL, interruption_limit BIGINT, linger_ms BIGINT NOT NULL,
    payload TEXT NOT NULL, received_ms BIGINT NOT NULL,
    PRIMARY KEY (agent_id, seq));
CREATE INDEX records_day ON records(day);
CREATE TABLE availability (
    agent_id TEXT NOT NULL, day TEXT NOT NULL, available_ms BIGINT NOT NULL, observed_ms BIGINT NOT NULL,
    PRIMARY KEY (agent_id, day));
