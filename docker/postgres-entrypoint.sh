#!/bin/sh
# The scale-out stack's PostgreSQL: creates the cluster on first start (user and database `mail`, password from
# POSTGRES_PASSWORD, scram-sha-256 for every host on the compose network), then runs the server in the foreground
# so the container's stop signal reaches it.
set -eu
bin=/usr/lib/postgresql/15/bin
data=/var/lib/signalfetch-postgres/data
if [ ! -s "$data/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
    "$bin/initdb" -D "$data" -U mail --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f /tmp/pwfile
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$data/pg_hba.conf"
    "$bin/pg_ctl" -D "$data" -o "-c listen_addresses= -c unix_socket_directories=/tmp" -w start >/dev/null
    "$bin/createdb" -h /tmp -U mail mail
    "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    echo "postgres-entrypoint: created the cluster and the database mail"
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c unix_socket_directories=/tmp -c max_connections=200
