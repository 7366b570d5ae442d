#!/bin/sh
# Container health probe for the SignalFetch image (one image runs mailboxd, apns-sim and mail-client).
# Probes SIGNALFETCH_HEALTH_URL (e.g. https://localhost:8443/healthz for mailboxd, http://localhost:2198/healthz
# for apns-sim), trusting SIGNALFETCH_HEALTH_CA when set. Without a URL there is nothing to probe: healthy.
set -eu
url="${SIGNALFETCH_HEALTH_URL:-}"
[ -n "$url" ] || exit 0
if [ -n "${SIGNALFETCH_HEALTH_CA:-}" ]; then
    exec curl --fail --silent --show-error --max-time 3 --output /dev/null --cacert "$SIGNALFETCH_HEALTH_CA" "$url"
fi
exec curl --fail --silent --show-error --max-time 3 --output /dev/null "$url"
