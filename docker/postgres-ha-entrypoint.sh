#!/bin/sh
# The HA stack's PostgreSQL (docker/docker-compose.ha.yml), run by pg_auto_failover. PGAF_ROLE=monitor runs the
# monitor, which decides failovers (health checks every second, a silent node unhealthy after 2 s, an unreachable
# primary taken as demoted after 3 s); PGAF_ROLE=node runs a keeper that creates its node on first start (the
# first to register becomes the primary, the next a synchronous standby, from a base backup) and then follows what
# the monitor assigns: promotion, or rejoining as a standby after it was lost. PGAF_HOSTNAME names the node;
# PGAF_ADDRESS (default: the name) is where the others reach it, PGAF_MONITOR where the monitor is.
# Authentication is `trust` on the stack's internal database network only: a throwaway
# stack, like the demo's passwords.
set -eu
export PATH=/usr/lib/postgresql/15/bin:$PATH
root=/var/lib/signalfetch-postgres
export XDG_CONFIG_HOME=$root/xdg/config XDG_DATA_HOME=$root/xdg/data XDG_RUNTIME_DIR=$root/xdg/run
mkdir -p "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
: "${PGAF_HOSTNAME:?set PGAF_HOSTNAME}"
: "${PGAF_ROLE:?set PGAF_ROLE to monitor or node}"
# No argument: run the role. `health`: the container's health check. `state`: the formation's nodes and states.
case "${1:-$PGAF_ROLE}" in
monitor)
    if [ ! -s "$root/monitor/PG_VERSION" ]; then
        pg_autoctl create monitor --pgdata "$root/monitor" --pgport 5432 \
            --hostname "${PGAF_ADDRESS:-$PGAF_HOSTNAME}" --auth trust --no-ssl
        cat >>"$root/monitor/postgresql.conf" <<'CONF'
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 2000
pgautofailover.primary_demote_timeout = 3000
pgautofailover.startup_grace_period = 2000
CONF
    fi
    exec pg_autoctl run --pgdata "$root/monitor"
    ;;
node)
    # A standby's base backup of this node starts by waiting for a spread checkpoint (tens of seconds or more); a
    # CHECKPOINT here while one is in progress ends that wait at once, so a standby joins or rejoins in seconds.
    (
        while sleep 2; do
            backups=$(psql -X -q -At -h 127.0.0.1 -p 5432 -d postgres \
                -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'backup'" 2>/dev/null || echo 0)
            case "$backups" in
            0 | "") ;;
            *) psql -X -q -h 127.0.0.1 -p 5432 -d postgres -c CHECKPOINT >/dev/null 2>&1 || true ;;
            esac
        done
    ) &
    if [ -s "$root/node/PG_VERSION" ] && [ -d "$XDG_CONFIG_HOME/pg_autoctl" ]; then
        exec pg_autoctl run --pgdata "$root/node"
    fi
    exec pg_autoctl create postgres --pgdata "$root/node" --pgport 5432 \
        --hostname "${PGAF_ADDRESS:-$PGAF_HOSTNAME}" --name "$PGAF_HOSTNAME" --auth trust --no-ssl --pg-hba-lan --dbname mail \
        --monitor "postgres://autoctl_node@${PGAF_MONITOR:-monitor}:5432/pg_auto_failover?sslmode=disable" --run
    ;;
health)
    # A node is healthy once the monitor has it serving (alone, as the primary or as a standby); the monitor once it
    # answers.
    if [ "$PGAF_ROLE" = monitor ]; then exec pg_isready -q -h 127.0.0.1 -p 5432; fi
    state=$(pg_autoctl show state --pgdata "$root/node" --json 2>/dev/null |
        awk -v name="\"$PGAF_HOSTNAME\"," '/"nodename"/ { mine = ($2 == name) }
            mine && /"current_group_state"/ { gsub(/[",]/, "", $2); print $2; exit }') || exit 1
    case "$state" in single | wait_primary | primary | secondary) ;; *) exit 1 ;; esac
    pg_isready -q -h 127.0.0.1 -p 5432
    ;;
state)
    # The formation as the monitor sees it (`docker compose exec monitor postgres-ha-entrypoint state`).
    if [ "$PGAF_ROLE" = monitor ]; then exec pg_autoctl show state --pgdata "$root/monitor"; fi
    exec pg_autoctl show state --pgdata "$root/node"
    ;;
*)
    echo "postgres-ha-entrypoint: PGAF_ROLE must be monitor or node" >&2
    exit 2
    ;;
esac
