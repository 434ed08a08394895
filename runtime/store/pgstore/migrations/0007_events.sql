-- compat: expand
-- Events of owners (store.OwnerEvent), the slots where they meet their
-- waits (store.EventSlot) and the triggers they start runs of
-- (store.Trigger). An event's seq is drawn from its owner's row of
-- owner_event_seqs, updated in the accepting transaction: two
-- transactions accepting for one owner conflict there, so the second
-- is run again and draws the next number after the first committed, and
-- an owner's events commit in seq order. The filters of a listing are
-- columns: the undelivered and the pending ones are found without
-- decoding a record. New tables only: a weir of schema version 6 keeps
-- running beside them.
CREATE TABLE owner_events (
    owner            text COLLATE "C" NOT NULL,
    id               text COLLATE "C" NOT NULL,
    seq              bigint NOT NULL,
    accepted_ns      bigint NOT NULL,
    undelivered      boolean NOT NULL,
    triggers_pending boolean NOT NULL,
    v                smallint NOT NULL,
    data             bytea NOT NULL,
    PRIMARY KEY (owner, id)
);
CREATE UNIQUE INDEX owner_events_seq ON owner_events (owner, seq);
CREATE INDEX owner_events_accepted ON owner_events (accepted_ns, owner, id);
CREATE INDEX owner_events_pending ON owner_events (owner, seq) WHERE triggers_pending;
CREATE TABLE owner_event_seqs (
    owner text COLLATE "C" PRIMARY KEY,
    seq   bigint NOT NULL
);
CREATE TABLE event_slots (
    owner text COLLATE "C" NOT NULL,
    name  text COLLATE "C" NOT NULL,
    key   text COLLATE "C" NOT NULL,
    v     smallint NOT NULL,
    data  bytea NOT NULL,
    PRIMARY KEY (owner, name, key)
);
CREATE TABLE triggers (
    owner text COLLATE "C" NOT NULL,
    name  text COLLATE "C" NOT NULL,
    event text COLLATE "C" NOT NULL,
    v     smallint NOT NULL,
    data  bytea NOT NULL,
    PRIMARY KEY (owner, name)
);
CREATE INDEX triggers_event ON triggers (owner, event, name);
