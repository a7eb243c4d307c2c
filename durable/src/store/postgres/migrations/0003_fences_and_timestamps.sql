-- Version 3: times as timestamptz (microseconds), states and missed-run
-- policies by name, and the fence of a run (owner, run number), with the
-- owner's readable name and the key of its session lock.
ALTER TABLE chronopool_jobs
    ALTER COLUMN next_fire TYPE timestamptz
        USING 'epoch'::timestamptz + next_fire * interval '1 millisecond',
    ALTER COLUMN lease_until TYPE timestamptz
        USING 'epoch'::timestamptz + lease_until * interval '1 millisecond',
    ALTER COLUMN finished_at TYPE timestamptz
        USING 'epoch'::timestamptz + finished_at * interval '1 millisecond',
    ALTER COLUMN state TYPE text
        USING CASE state WHEN 0 THEN 'scheduled' WHEN 1 THEN 'running' WHEN 2 THEN 'dead'
                         ELSE 'done' END,
    ADD CONSTRAINT chronopool_jobs_state
        CHECK (state IN ('scheduled', 'running', 'done', 'dead')),
    ALTER COLUMN misfire DROP DEFAULT;
-- RunAll was Burst; RunOnce (and Skip, which ran none) is Skip.
ALTER TABLE chronopool_jobs RENAME COLUMN misfire TO missed;
ALTER TABLE chronopool_jobs
    ALTER COLUMN missed TYPE text USING CASE missed WHEN 2 THEN 'burst' ELSE 'skip' END,
    ALTER COLUMN missed SET DEFAULT 'skip',
    ADD CONSTRAINT chronopool_jobs_missed CHECK (missed IN ('burst', 'skip', 'delay')),
    -- microseconds: an occurrence later than this is skipped
    ADD COLUMN catch_up BIGINT,
    ADD COLUMN run BIGINT,
    ADD COLUMN owner_name TEXT,
    ADD COLUMN owner_lock BIGINT;
-- Periods in microseconds.
UPDATE chronopool_jobs
    SET recurrence = 'every ' || (substr(recurrence, 7)::bigint * 1000) || 'us'
    WHERE recurrence LIKE 'every %';
