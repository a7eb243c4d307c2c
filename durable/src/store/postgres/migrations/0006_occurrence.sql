-- Version 6: the occurrence a recurring job's retry belongs to. A retry
-- moves next_fire to the retry's time; the occurrence's own due time stays
-- here, so that the next occurrence follows the schedule, not the retry.
-- NULL when next_fire is the occurrence's own (every job not retrying).
ALTER TABLE chronopool_jobs ADD COLUMN occurrence timestamptz;
