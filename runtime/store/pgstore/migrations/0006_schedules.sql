-- compat: expand
-- Schedules (store.Schedule): flows started on ticks. next_ns is the
-- stored next tick; schedules_due walks the ones not paused by it, so a
-- pass reads only the schedules due. A new table only: a weir of schema
-- version 5 keeps running beside it.
CREATE TABLE schedules (
    owner   text COLLATE "C" NOT NULL,
    name    text COLLATE "C" NOT NULL,
    next_ns bigint NOT NULL,
    paused  boolean NOT NULL,
    v       smallint NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (owner, name)
);
CREATE INDEX schedules_due ON schedules (next_ns, owner, name) WHERE NOT paused;
