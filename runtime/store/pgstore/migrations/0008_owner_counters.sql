-- compat: expand
-- Per-owner counters shared by a fleet (DESIGN §12). runs_owner_phase
-- lets admission count an owner's runs in a phase (its max_queued and
-- max_running) without reading them. owner_spend is the spend window
-- budget_per_hour is checked against: what an owner's runs were charged
-- per minute, one row per daemon (host) so that daemons charging one
-- owner at once never write the same row. New index and table only: a
-- weir of schema version 7 keeps running beside it (its charges are not
-- counted in the window).
CREATE INDEX runs_owner_phase ON runs (owner, phase, id);
CREATE TABLE owner_spend (
    owner  text COLLATE "C" NOT NULL,
    minute bigint NOT NULL,
    host   text COLLATE "C" NOT NULL,
    cost   bigint NOT NULL,
    PRIMARY KEY (owner, minute, host)
);
CREATE INDEX owner_spend_minute ON owner_spend (minute);
