-- Version 3: times in microseconds since the epoch, states and missed-run
-- policies by name, the fence of a run (owner, run number) with the
-- owner's readable name and session lock key, and a sequence number that
-- every schedule (and revival) of a job takes, so that a poll can ask for
-- only what changed since it last looked. The table is rebuilt (SQLite
-- cannot change a column's type in place).
CREATE TABLE chronopool_jobs_v3 (
    key         TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    payload     BLOB NOT NULL,
    -- once, every <period>us, or cron <zone> <expression>
    recurrence  TEXT NOT NULL,
    -- microseconds since the epoch
    next_fire   INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('scheduled', 'running', 'done', 'dead')),
    attempt     INTEGER NOT NULL DEFAULT 0,
    missed      TEXT NOT NULL DEFAULT 'skip' CHECK (missed IN ('burst', 'skip', 'delay')),
    -- microseconds: an occurrence later than this is skipped
    catch_up    INTEGER,
    -- the running run's fence, and who it is for people
    owner       TEXT,
    run         INTEGER,
    owner_name  TEXT,
    owner_lock  INTEGER,
    lease_until INTEGER,
    last_error  TEXT,
    finished_at INTEGER,
    -- the order of schedules, from chronopool_seq
    seq         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO chronopool_jobs_v3
    (key, name, payload, recurrence, next_fire, state, attempt, missed,
     owner, lease_until, last_error, finished_at)
SELECT key, name, payload,
       CASE WHEN recurrence LIKE 'every %'
            THEN 'every ' || (CAST(substr(recurrence, 7) AS INTEGER) * 1000) || 'us'
            ELSE recurrence END,
       next_fire * 1000,
       CASE state WHEN 0 THEN 'scheduled' WHEN 1 THEN 'running' WHEN 2 THEN 'dead'
                  ELSE 'done' END,
       attempt,
       -- RunAll was Burst; RunOnce (and Skip, which ran none) is Skip
       CASE misfire WHEN 2 THEN 'burst' ELSE 'skip' END,
       owner, lease_until * 1000, last_error, finished_at * 1000
FROM chronopool_jobs;
UPDATE chronopool_jobs_v3 SET seq = rowid;
DROP TABLE chronopool_jobs;
ALTER TABLE chronopool_jobs_v3 RENAME TO chronopool_jobs;
CREATE INDEX chronopool_jobs_due ON chronopool_jobs (state, next_fire);
-- Only running rows have a lease: a schedule does not touch this index.
CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (lease_until) WHERE state = 'running';
CREATE INDEX chronopool_jobs_by_seq ON chronopool_jobs (seq);
-- The last sequence number drawn (never drawn again, whatever is deleted).
CREATE TABLE chronopool_seq (value INTEGER NOT NULL);
INSERT INTO chronopool_seq (value) SELECT coalesce(max(seq), 0) FROM chronopool_jobs;
