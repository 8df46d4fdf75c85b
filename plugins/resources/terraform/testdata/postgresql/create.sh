#!/bin/sh
# Makes (or adopts) the role and database $DB, the role's password $PASSWORD, and the
# extensions of $EXTENSIONS (comma-separated) in it.
set -eu
psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -v db="$DB" <<'SQL'
\getenv pw PASSWORD
SELECT format('CREATE ROLE %I LOGIN', :'db') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'db') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'db', :'pw') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'db') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', :'db', :'db') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'db') \gexec
SQL
if [ -n "$EXTENSIONS" ]; then
	psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -v db="$DB" -v extensions="$EXTENSIONS" <<'SQL'
\c :db
SELECT format('CREATE EXTENSION IF NOT EXISTS %I', e) FROM unnest(string_to_array(:'extensions', ',')) AS e \gexec
SQL
fi
