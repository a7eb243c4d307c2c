-- Version 5: what operators control and read (issue: pause, limits, history).
-- A paused job keeps its schedule and is neither placed nor claimed.
ALTER TABLE chronopool_jobs ADD COLUMN paused boolean NOT NULL DEFAULT false;
-- When the running run was claimed (its history row's start).
ALTER TABLE chronopool_jobs ADD COLUMN started_at timestamptz;
-- Listing by handler name.
CREATE INDEX chronopool_jobs_by_name ON chronopool_jobs (name, state);
-- Every job of these handlers is paused.
CREATE TABLE chronopool_paused_names (name text PRIMARY KEY);
-- At most max_running runs of these handlers at once, across processes:
-- a claim of their jobs locks the row, so claims of one name take turns.
CREATE TABLE chronopool_limits (
    name        text PRIMARY KEY,
    max_running bigint NOT NULL
);
-- The runs that ended: the last ones of each job, kept by the retention
-- settings.
CREATE TABLE chronopool_runs (
    id         bigserial PRIMARY KEY,
    key        text NOT NULL,
    name       text NOT NULL,
    owner      text NOT NULL,
    owner_name text,
    attempt    bigint NOT NULL,
    due        timestamptz NOT NULL,
    started_at timestamptz,
    ended_at   timestamptz NOT NULL,
    outcome    text NOT NULL,
    error      text
);
CREATE INDEX chronopool_runs_by_key ON chronopool_runs (key, id);
CREATE INDEX chronopool_runs_by_end ON chronopool_runs (ended_at);
