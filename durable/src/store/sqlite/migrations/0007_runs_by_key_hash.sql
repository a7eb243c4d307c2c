-- Version 7: on PostgreSQL, the history's index by key becomes a hash
-- index (a b-tree entry there holds at most 2,704 bytes). SQLite's b-trees
-- hold any key: nothing changes here, the version stays in step.
SELECT 1;
