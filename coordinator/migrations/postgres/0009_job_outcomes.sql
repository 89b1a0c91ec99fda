-- Jobs that tell the truth (issue 28). A task now ends `completed` (exit 0), `failed`
-- (it ran and failed: a non-zero exit, a signal, a program not found or not
-- executable, the sandbox, the output limit), `cancelled`, or `lost` (its retries used
-- up); `signal` (its number) and `end_reason` (in words) say how, and `jobs.reason` why
-- the job ended as it did. `runs` counts the leases a machine took to run (an eviction
-- is one run; a lease given back before its guest started is none). Same text in both
-- dialects.
ALTER TABLE tasks ADD COLUMN signal BIGINT;
ALTER TABLE tasks ADD COLUMN end_reason TEXT;
ALTER TABLE tasks ADD COLUMN runs BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN reason TEXT;
-- Before, a task failed only once its retries were used up: that is `lost` now.
UPDATE tasks SET state = 'lost', end_reason = 'retries used up (leases lost or given back as failed)' WHERE state = 'failed';
UPDATE jobs SET state = 'lost', reason = 'retries used up (leases lost or given back as failed)' WHERE state = 'failed';
-- Before, every guest that ended was `completed`, whatever its exit code; -1 was a
-- guest that never started (a program not found, say).
UPDATE tasks SET state = 'failed',
    end_reason = CASE WHEN exit_code = -1 THEN 'the guest never started (its agent sent no reason)'
                      ELSE 'exit code ' || exit_code END
  WHERE state = 'completed' AND exit_code IS NOT NULL AND exit_code <> 0;
UPDATE task_events SET kind = 'failed'
  WHERE kind = 'completed' AND EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = task_events.job_id AND t.rank = task_events.rank
    AND t.lease_epoch = task_events.lease_epoch AND t.state = 'failed');
UPDATE jobs SET state = 'failed',
    reason = (SELECT t.end_reason FROM tasks t WHERE t.job_id = jobs.id AND t.state = 'failed' ORDER BY t.rank LIMIT 1)
  WHERE state = 'completed' AND EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = jobs.id AND t.state = 'failed');
-- Runs so far, as well as the old counters tell: each lease counted against retries
-- (the running one included) and each eviction.
UPDATE tasks SET runs = attempts + evictions;
