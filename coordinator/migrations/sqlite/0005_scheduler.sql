-- The scheduler (lull_core::sched) places jobs; leases it assigns wait for their agent's
-- long poll: `lease_delivered` is 0 until the agent received the lease (existing leases
-- were handed out by the poll itself). `estimate_s` is the submitter's runtime estimate,
-- used only while the program has no history. `placements` keeps each job's latest
-- placement (machines, algorithm, reason, prediction) for the API and the dashboard;
-- `program_stats` the prediction error per program, written by the leading replica.
-- Same text in both dialects.
ALTER TABLE tasks ADD COLUMN lease_delivered BIGINT NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN estimate_s DOUBLE PRECISION;
CREATE TABLE placements (
    job_id BIGINT PRIMARY KEY, agents TEXT NOT NULL, algorithm TEXT NOT NULL, reason TEXT NOT NULL,
    prediction_source TEXT NOT NULL, predicted_runtime_s DOUBLE PRECISION NOT NULL, placed_ms BIGINT NOT NULL);
CREATE TABLE program_stats (program TEXT PRIMARY KEY, stats TEXT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE INDEX tasks_undelivered ON tasks(agent_id, lease_delivered);
