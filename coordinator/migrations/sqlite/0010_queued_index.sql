-- The queue ahead of a job (`store/job_view.rs::queued_before`, counted for every
-- submission's waiting explanation) read from the queued jobs alone, not from every job
-- the coordinator ever had: without this index the count scanned the whole jobs table
-- (PostgreSQL spent most of a 20,000-job submission run in it). Same text in both
-- dialects.
CREATE INDEX jobs_queued ON jobs(id) WHERE state = 'queued';
