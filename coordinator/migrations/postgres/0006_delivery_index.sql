-- Lease delivery looks up an agent's assigned, not yet delivered leases in (job, rank)
-- order. With only (agent_id, lease_delivered) indexed, SQLite preferred walking every
-- leased task in (job, rank) order through `tasks_queue` to avoid a sort, so each poll
-- cost O(leased tasks) (measured: `lull bench placements`, 20,000 leased tasks). This
-- index answers the filter and the order together. Same text in both dialects.
DROP INDEX tasks_undelivered;
CREATE INDEX tasks_delivery ON tasks(agent_id, lease_delivered, state, job_id, rank);
