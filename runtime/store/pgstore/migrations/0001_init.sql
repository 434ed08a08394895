-- weir's records, one table per kind. Every record is kept whole as JSON
-- in data (bytea: exactly the bytes written, which json would re-check
-- and jsonb would reformat), with its format version in v; the other
-- columns are copies of the fields the store looks records up or orders
-- them by. Key columns use the "C" collation so that their order is the
-- byte order of the ids, as in the embedded store. Times used for order
-- are nanoseconds since 1970 (bigint), saturated at the ends of the
-- range it holds (the years 1677 and 2262): the zero time is the least.

CREATE TABLE flow_versions (
    name text COLLATE "C" NOT NULL,
    hash text COLLATE "C" NOT NULL,
    seq  bigint NOT NULL,
    v    smallint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (name, hash)
);

-- The latest version of each flow name.
CREATE TABLE flow_latest (
    name text COLLATE "C" PRIMARY KEY,
    seq  bigint NOT NULL,
    hash text COLLATE "C" NOT NULL
);

CREATE TABLE sources (
    hash text COLLATE "C" PRIMARY KEY,
    v    smallint NOT NULL,
    data bytea NOT NULL
);

CREATE TABLE runs (
    id            text COLLATE "C" PRIMARY KEY,
    owner         text COLLATE "C" NOT NULL,
    phase         text COLLATE "C" NOT NULL,
    parent_run_id text COLLATE "C" NOT NULL,
    finished_ns   bigint, -- NULL while the run has not finished
    v             smallint NOT NULL,
    data          bytea NOT NULL
);
CREATE INDEX runs_owner ON runs (owner, id);
CREATE INDEX runs_phase ON runs (phase, id);
CREATE INDEX runs_parent ON runs (parent_run_id, id);

CREATE TABLE continuations (
    run_id text COLLATE "C" PRIMARY KEY,
    v      smallint NOT NULL,
    data   bytea NOT NULL
);

CREATE TABLE dedup (
    owner      text COLLATE "C" NOT NULL,
    request_id text COLLATE "C" NOT NULL,
    v          smallint NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (owner, request_id)
);

CREATE TABLE tasks (
    id         text COLLATE "C" PRIMARY KEY,
    run_id     text COLLATE "C" NOT NULL,
    ready_ns   bigint NOT NULL,
    leased     boolean NOT NULL,
    wait_child text COLLATE "C" NOT NULL,
    -- fence counts the task's claims; a lease carries the value it was
    -- taken with, so a holder whose lease was taken over can be told by
    -- its stale token (several daemons on one database).
    fence      bigint NOT NULL DEFAULT 0,
    v          smallint NOT NULL,
    data       bytea NOT NULL
);
-- The queue: unleased tasks by ready time. Leased tasks are not in it.
CREATE INDEX tasks_queue ON tasks (ready_ns, id) WHERE NOT leased;
CREATE INDEX tasks_run ON tasks (run_id, id);
CREATE INDEX tasks_child ON tasks (wait_child, id) WHERE wait_child <> '';

CREATE TABLE leases (
    task_id     text COLLATE "C" PRIMARY KEY,
    deadline_ns bigint NOT NULL,
    -- The holder's fencing token (see tasks.fence).
    fence       bigint NOT NULL DEFAULT 0,
    v           smallint NOT NULL,
    data        bytea NOT NULL
);
CREATE INDEX leases_deadline ON leases (deadline_ns, task_id);

CREATE TABLE idem (
    key  text COLLATE "C" PRIMARY KEY,
    v    smallint NOT NULL,
    data bytea NOT NULL
);

CREATE TABLE dead_letters (
    task_id text COLLATE "C" PRIMARY KEY,
    owner   text COLLATE "C" NOT NULL,
    at_ns   bigint NOT NULL,
    v       smallint NOT NULL,
    data    bytea NOT NULL
);
CREATE INDEX dead_letters_at ON dead_letters (at_ns, task_id);
CREATE INDEX dead_letters_owner ON dead_letters (owner, at_ns, task_id);

-- Events are numbered by a sequence: unique and increasing, with gaps
-- where a transaction that took a number was rolled back.
CREATE SEQUENCE events_seq AS bigint;
CREATE TABLE events (
    seq    bigint PRIMARY KEY,
    run_id text COLLATE "C" NOT NULL,
    v      smallint NOT NULL,
    data   bytea NOT NULL
);
CREATE INDEX events_run ON events (run_id, seq);

CREATE TABLE cohorts (
    run_id text COLLATE "C" NOT NULL,
    node   text COLLATE "C" NOT NULL,
    visit  bigint NOT NULL,
    v      smallint NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, node, visit)
);

CREATE TABLE cohort_items (
    run_id text COLLATE "C" NOT NULL,
    node   text COLLATE "C" NOT NULL,
    visit  bigint NOT NULL,
    idx    bigint NOT NULL,
    v      smallint NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, node, visit, idx)
);

CREATE TABLE agent_turns (
    run_id text COLLATE "C" NOT NULL,
    node   text COLLATE "C" NOT NULL,
    visit  bigint NOT NULL,
    turn   bigint NOT NULL,
    v      smallint NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, node, visit, turn)
);

-- Small named values of the engine's (config version and the like).
CREATE TABLE meta (
    key   text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);
