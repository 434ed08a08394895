-- Runs newest first: run ids are random, so listing an owner's runs by
-- time needs their creation time (and flow, a filter of the same list) in
-- columns of their own and an index on (owner, created). Runs written
-- before keep their JSON's created_at, to the microsecond PostgreSQL's
-- timestamps hold.
ALTER TABLE runs ADD COLUMN created_ns bigint;
ALTER TABLE runs ADD COLUMN flow text COLLATE "C";
UPDATE runs SET
    created_ns = (extract(epoch FROM (convert_from(data, 'UTF8')::jsonb->>'created_at')::timestamptz) * 1000000)::bigint * 1000,
    flow = convert_from(data, 'UTF8')::jsonb->>'flow';
ALTER TABLE runs ALTER COLUMN created_ns SET NOT NULL;
ALTER TABLE runs ALTER COLUMN flow SET NOT NULL;
CREATE INDEX runs_owner_created ON runs (owner, created_ns DESC, id);
