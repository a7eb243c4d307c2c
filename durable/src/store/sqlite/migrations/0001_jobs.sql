-- Version 1: the jobs, with times in milliseconds and states as numbers
-- (kept as it was written, so that a file of that version migrates).
CREATE TABLE chronopool_jobs (
    key         TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    payload     BLOB NOT NULL,
    recurrence  TEXT NOT NULL,
    next_fire   INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    attempt     INTEGER NOT NULL DEFAULT 0,
    misfire     INTEGER NOT NULL DEFAULT 0,
    owner       TEXT,
    lease_until INTEGER,
    last_error  TEXT
);
CREATE INDEX chronopool_jobs_due ON chronopool_jobs (state, next_fire);
CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (state, lease_until);
