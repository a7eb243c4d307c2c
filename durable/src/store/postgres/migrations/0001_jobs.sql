-- Version 1: the jobs, with times in milliseconds and states as numbers
-- (kept as it was written, so that a database of that version migrates).
CREATE TABLE chronopool_jobs (
    key         TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    payload     BYTEA NOT NULL,
    recurrence  TEXT NOT NULL,
    next_fire   BIGINT NOT NULL,
    state       BIGINT NOT NULL,
    attempt     BIGINT NOT NULL DEFAULT 0,
    misfire     BIGINT NOT NULL DEFAULT 0,
    owner       TEXT,
    lease_until BIGINT,
    last_error  TEXT
);
CREATE INDEX chronopool_jobs_due ON chronopool_jobs (state, next_fire);
CREATE INDEX chronopool_jobs_lease ON chronopool_jobs (state, lease_until);
