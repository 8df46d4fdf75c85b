#!/bin/sh
# Drops the database and role $DB; with RETAIN=true keeps both, the role unable to log in.
set -eu
if [ "$RETAIN" = "true" ]; then
	psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -v db="$DB" <<'SQL'
SELECT format('ALTER ROLE %I NOLOGIN', :'db') WHERE EXISTS (SELECT FROM pg_roles WHERE rolname = :'db') \gexec
SQL
	exit 0
fi
psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -v db="$DB" <<'SQL'
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', :'db') \gexec
SELECT format('DROP ROLE IF EXISTS %I', :'db') \gexec
SQL
