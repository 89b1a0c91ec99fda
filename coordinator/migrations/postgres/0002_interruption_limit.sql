-- The daily interruption limit agents report in heartbeats: the latest per machine, and
-- the last one seen on each day (reports show a machine's limit on days without an
-- interruption too). Same text in both dialects.
ALTER TABLE agents ADD COLUMN interruption_limit BIGINT;
ALTER TABLE availability ADD COLUMN interruption_limit BIGINT;
