-- Version 2: when a job became done or dead (for retention).
ALTER TABLE chronopool_jobs ADD COLUMN finished_at INTEGER;
