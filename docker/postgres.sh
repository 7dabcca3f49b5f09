#!/bin/sh
# PostgreSQL for the fleet's gradebook: a cluster in $PGDATA (made on first start, with the database
# `gradebook` and the user `workshop`, password $POSTGRES_PASSWORD), listening on 127.0.0.1:$POSTGRES_PORT.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}" "${POSTGRES_PORT:=5432}"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" -U workshop --pwfile="$pwfile" --auth-local=peer --auth-host=scram-sha-256 -E UTF8 >/dev/null
  rm -f "$pwfile"
  echo "CREATE DATABASE gradebook OWNER workshop" | postgres --single -D "$PGDATA" postgres >/dev/null
fi
exec postgres -D "$PGDATA" -p "$POSTGRES_PORT" -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp
