-- Version 5: what operators control and read (issue: pause, limits, history).
-- A paused job keeps its schedule and is neither placed nor claimed.
ALTER TABLE chronopool_jobs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
-- When the running run was claimed (its history row's start).
ALTER TABLE chronopool_jobs ADD COLUMN started_at INTEGER;
-- Listing by handler name.
CREATE INDEX chronopool_jobs_by_name ON chronopool_jobs (name, state);
-- Every job of these handlers is paused.
CREATE TABLE chronopool_paused_names (name TEXT PRIMARY KEY NOT NULL);
-- At most max_running runs of these handlers at once, across processes.
CREATE TABLE chronopool_limits (
    name        TEXT PRIMARY KEY NOT NULL,
    max_running INTEGER NOT NULL
);
-- The runs that ended: the last ones of each job, kept by the retention
-- settings. Times in microseconds since the epoch.
CREATE TABLE chronopool_runs (
    id         INTEGER PRIMARY KEY,
    key        TEXT NOT NULL,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    owner_name TEXT,
    attempt    INTEGER NOT NULL,
    due        INTEGER NOT NULL,
    started_at INTEGER,
    ended_at   INTEGER NOT NULL,
    outcome    TEXT NOT NULL,
    error      TEXT
);
CREATE INDEX chronopool_runs_by_key ON chronopool_runs (key, id);
CREATE INDEX chronopool_runs_by_end ON chronopool_runs (ended_at);
