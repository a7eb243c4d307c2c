-- Version 3: times as timestamptz (microseconds), states and missed-run
-- policies by name, the fence of a run (owner, run number) with the
-- owner's readable name and the key of its session lock, and a sequence
-- number that every schedule (and revival) of a job takes, so that a poll
-- can ask for only what changed since it last looked; a statement that
-- schedules notifies the listeners (at its commit).
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
-- Only running rows have a lease: a schedule does not touch this index.
DROP INDEX chronopool_jobs_lease;
CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (lease_until) WHERE state = 'running';
CREATE SEQUENCE chronopool_jobs_seq;
ALTER TABLE chronopool_jobs
    ADD COLUMN seq BIGINT NOT NULL DEFAULT nextval('chronopool_jobs_seq');
CREATE INDEX chronopool_jobs_by_seq ON chronopool_jobs (seq);
CREATE FUNCTION chronopool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chronopool_jobs', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER chronopool_jobs_notify AFTER INSERT OR UPDATE OF seq ON chronopool_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION chronopool_jobs_notify();
