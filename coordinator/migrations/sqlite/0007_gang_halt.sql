-- Gangs that hold (issue 12): a gang whose members all took their leases once has
-- `gang_started` 1; after that, losing one member halts the others (their agents
-- freeze them) from `halted_ms` until a replacement takes the lost rank, or until the
-- halt times out and the whole gang is re-queued (then `gang_started` is 0 again).
-- Same text in both dialects.
ALTER TABLE jobs ADD COLUMN gang_started INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN halted_ms BIGINT;
