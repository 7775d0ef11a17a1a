#!/bin/sh
# Debian's Postgres, configured the way the postgres image's entrypoint does it: a
# cluster in /var/lib/postgresql/data owned by POSTGRES_USER (password
# POSTGRES_PASSWORD, or the file POSTGRES_PASSWORD_FILE names (a swarm secret; scram
# over the network), with the database POSTGRES_DB.
set -eu
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
DATA=/var/lib/postgresql/data
AS_POSTGRES="setpriv --reuid=postgres --regid=postgres --init-groups"
mkdir -p "$DATA" /run/postgresql
chown postgres:postgres "$DATA" /run/postgresql
chmod 0700 "$DATA"
if [ ! -s "$DATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  $AS_POSTGRES "$BIN/initdb" -D "$DATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$DATA/pg_hba.conf"
  echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" \
    | $AS_POSTGRES "$BIN/postgres" --single -D "$DATA" postgres >/dev/null
fi
# The postgres image's way: arguments after "postgres" are the server's own (-c ...).
if [ "${1:-}" = postgres ]; then shift; fi
exec $AS_POSTGRES "$BIN/postgres" -D "$DATA" -c listen_addresses='*' "$@"
