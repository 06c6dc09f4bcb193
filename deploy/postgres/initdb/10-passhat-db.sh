#!/bin/sh
# Creates passhat's results database next to Temporal's. The postgres image runs the
# scripts in /docker-entrypoint-initdb.d once, when it initialises an empty data volume,
# before it starts listening on TCP; a volume created earlier needs `docker compose down -v`.
#
# Temporal's own databases (temporal, temporal_visibility) are created by auto-setup.
# passhat gets its own role and database so its store never shares a schema with them.
set -eu

: "${PASSHAT_DB_USER:=passhat}"
: "${PASSHAT_DB_NAME:=passhat}"
: "${PASSHAT_DB_PASSWORD:?set PASSHAT_DB_PASSWORD}"

# psql substitutes :"name" (identifier) and :'name' (literal) with proper quoting, so odd
# characters in a password cannot break out of the statement.
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
  -v user="$PASSHAT_DB_USER" -v db="$PASSHAT_DB_NAME" -v pw="$PASSHAT_DB_PASSWORD" <<'SQL'
CREATE ROLE :"user" LOGIN PASSWORD :'pw';
CREATE DATABASE :"db" OWNER :"user";
SQL
