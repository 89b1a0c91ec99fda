-- The tail of each task's standard output and standard error (at most 64 KiB each, as
-- the completing agent sent it) and how many bytes the guest wrote to each in all, for
-- `GET /api/v1/jobs/{id}/output` and `lull jobs output`. Same text in both dialects.
ALTER TABLE tasks ADD COLUMN stdout_tail TEXT;
ALTER TABLE tasks ADD COLUMN stderr_tail TEXT;
ALTER TABLE tasks ADD COLUMN stdout_bytes BIGINT;
ALTER TABLE tasks ADD COLUMN stderr_bytes BIGINT;
