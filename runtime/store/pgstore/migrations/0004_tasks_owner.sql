-- compat: expand
-- Tasks by owner: the dispatcher reads the head of every owner's queue
-- (TaskListReadyByOwner), so an owner with one ready task is seen however
-- many another has queued ahead of it. A task's owner is its run's: tasks
-- written before take it from their run. A weir of schema version 3 keeps
-- running beside it: its inserts leave owner '' (the default), which the
-- listing reads as one owner more.
ALTER TABLE tasks ADD COLUMN owner text COLLATE "C" NOT NULL DEFAULT '';
UPDATE tasks SET owner = r.owner FROM runs r WHERE r.id = tasks.run_id;
CREATE INDEX tasks_owner_queue ON tasks (owner, ready_ns, id) WHERE NOT leased;
