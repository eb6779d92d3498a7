-- Where each daemon listens for HTTP (`[http] listen`, as configured), so `anima watch` can
-- follow the soul stream of every daemon on the soul. Empty for a daemon that joined before.
ALTER TABLE daemons ADD COLUMN listen text NOT NULL DEFAULT '';
