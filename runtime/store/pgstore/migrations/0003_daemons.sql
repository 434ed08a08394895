-- compat: expand
-- The fleet's roll (store.Roll): each daemon's tools and plugin checksums
-- and its liveness stamp. A new table only: a weir of schema version 2
-- keeps running beside it (it neither reports itself nor reads the roll).
CREATE TABLE daemons (
    id      text COLLATE "C" PRIMARY KEY,
    seen_ns bigint NOT NULL,
    v       smallint NOT NULL,
    data    bytea NOT NULL
);
