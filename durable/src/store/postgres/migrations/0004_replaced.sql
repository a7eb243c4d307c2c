-- Version 4: a running job that is scheduled again with IfExists::Replace
-- keeps its run (fence and lease) and is marked replaced: its run's finish
-- then only ends the run, and the new schedule stands.
ALTER TABLE chronopool_jobs ADD COLUMN replaced boolean NOT NULL DEFAULT false;
