-- Runs newest first: run ids are random, so listing an owner's runs by
-- time needs their creation time (and flow, a filter of the same list) in
-- columns of their own and an index on (owner, created). Runs written
-- before get them from their JSON, created_at to the nanosecond as the
-- store writes it (nanoseconds since 1970, saturated to bigint): a
-- timestamptz would round to microseconds, and a page's cursor compares
-- the exact time.
ALTER TABLE runs ADD COLUMN created_ns bigint;
ALTER TABLE runs ADD COLUMN flow text COLLATE "C";
UPDATE runs SET
    created_ns = (SELECT greatest(least(
            extract(epoch FROM regexp_replace(c, '\.[0-9]+', '')::timestamptz)::numeric * 1000000000
                + coalesce(rpad(substring(c FROM '\.([0-9]+)'), 9, '0')::numeric, 0),
            9223372036854775807), -9223372036854775808)::bigint
        FROM (SELECT convert_from(data, 'UTF8')::jsonb->>'created_at' AS c) AS j),
    flow = convert_from(data, 'UTF8')::jsonb->>'flow';
ALTER TABLE runs ALTER COLUMN created_ns SET NOT NULL;
ALTER TABLE runs ALTER COLUMN flow SET NOT NULL;
CREATE INDEX runs_owner_created ON runs (owner, created_ns DESC, id);
