-- Version 7: the history's index by key is a hash index. A b-tree entry
-- holds at most 2,704 bytes, and (key, id) ran out of room a few bytes
-- before the jobs' own key index did: a key the jobs table took could not
-- have its run recorded, and its run's end failed at every lease. A hash
-- index holds any key; its lookups by equality (a job's history, the trim
-- of its oldest runs) sort the job's few rows by id themselves. (Hash
-- indexes are crash-safe and replicated from PostgreSQL 10 on.)
DROP INDEX chronopool_runs_by_key;
CREATE INDEX chronopool_runs_by_key ON chronopool_runs USING hash (key);
