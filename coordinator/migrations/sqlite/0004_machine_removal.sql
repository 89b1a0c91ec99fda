-- A removed machine (`DELETE /api/v1/agents/{id}`, `lull coordinator machine rm`) keeps
-- its row, so its donated time stays in reports; it is gone from machine lists and its
-- secret no longer authenticates. Same text in both dialects.
ALTER TABLE agents ADD COLUMN removed_ms BIGINT;
CREATE INDEX agents_owner_name ON agents(owner, name);
