-- compat: expand
-- Service leases (store.ServiceLease): which daemon of the fleet does a
-- fleet-wide job (schedules, retention sweeps, redrive batches). A new
-- table only: a weir of schema version 4 keeps running beside it.
CREATE TABLE service_leases (
    name text COLLATE "C" PRIMARY KEY,
    v    smallint NOT NULL,
    data bytea NOT NULL
);
