-- compat: expand
-- The index of parked runs (store.Tx.RunParkedGroups): registration reads
-- the runs in phase waiting of the flow it registers, by version and
-- position, to say which of them could go on under the new version. Runs
-- written before get their version from their JSON and an empty position
-- (the engine reads such a run's own continuation). A weir of schema
-- version 8 keeps running beside it: it leaves both columns as they are
-- (a version never changes under it; a position it parks at is not
-- written, so its runs are read one by one).
ALTER TABLE runs ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN position text COLLATE "C" NOT NULL DEFAULT '';
UPDATE runs SET version = coalesce(convert_from(data, 'UTF8')::jsonb->>'version', '');
CREATE INDEX runs_parked ON runs (flow, version, position, id) WHERE phase = 'waiting';
