-- Version 11: reserved. Another branch brings its own 0011_….sql; at the merge that file
-- replaces this one (delete this file and its line in src/memory/migrate.rs). It changes
-- nothing, so a database migrated through it holds nothing 0011 would have made.
SELECT 1;
