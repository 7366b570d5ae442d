#!/bin/bash
# Entry point of the compose demo's Postfix (the `postfix` stage of docker/Dockerfile): takes SMTP on port 25 for
# one virtual domain (any localpart) and hands every message to mailboxd over LMTP; nothing is delivered locally,
# relayed or looked up in DNS. The same knowledge as Scripts/postfix-instance (the tested host-side instance), but
# in the container's default /etc/postfix and queue.
#
#   postfix-entrypoint           write main.cf and master.cf, then run Postfix in the foreground (logs on stdout)
#   postfix-entrypoint health    exit 0 if port 25 answers with a 220 greeting (the container's health check)
#
# Environment: POSTFIX_DOMAIN (example.test), POSTFIX_LMTP (inet:mailboxd:24), POSTFIX_HOSTNAME (mta.DOMAIN).
set -euo pipefail

if [[ ${1:-} == health ]]; then
    # Expect the greeting, then QUIT so the probe is a clean session in the log.
    exec 3<>/dev/tcp/127.0.0.1/25
    IFS= read -r -t 5 line <&3
    [[ $line == 220* ]] || exit 1
    printf 'QUIT\r\n' >&3
    IFS= read -r -t 5 line <&3 || true
    exit 0
fi
(($# == 0)) || { echo "usage: postfix-entrypoint [health]" >&2; exit 2; }

domain=${POSTFIX_DOMAIN:-example.test}
lmtp=${POSTFIX_LMTP:-inet:mailboxd:24}
hostname=${POSTFIX_HOSTNAME:-mta.$domain}

# The package was installed with "No configuration", so there is no main.cf yet: start from Debian's minimal one
# (postconf -e cannot create the file).
config_dir=${MAIL_CONFIG:-/etc/postfix}
[[ -f $config_dir/main.cf ]] || cp /usr/share/postfix/main.cf.debian "$config_dir/main.cf"

# main.cf, setting by setting:
# - maillog_file: log to the container's stdout instead of syslog (there is none); needs the postlog service in
#   master.cf (Debian's default has it; checked below) and `postfix start-fg`.
# - myhostname must differ from mailboxd's LMTP greeting (--lmtp-hostname), or the lmtp client reports a loop.
# - inet_protocols: IPv4 only, no IPv6 warnings on Docker networks without it.
# - mynetworks_style = subnet trusts every container on the compose network: for this throwaway stack only
#   (mail for $domain needs no trust at all, and anything else still ends at the error transports).
# - virtual_*: everything for $domain goes to mailboxd over LMTP, any localpart (an empty virtual_mailbox_maps
#   means smtpd validates no recipients: mailboxd answers 550 5.1.1 for an unknown user and Postfix bounces).
# - mydestination/local_*/alias_*/relay*/default_transport: no local delivery, no aliases, nothing leaves.
# - *_dns_support_level, *_host_lookup = native: no DNS queries of Postfix's own; mailboxd resolves through
#   getaddrinfo (/etc/hosts and Docker's DNS). smtpd does not reverse-resolve clients.
# - smtputf8_enable: UTF-8 addresses and headers pass through (mailboxd's LMTP listener offers SMTPUTF8).
# - queue and backoff times: a delivery deferred while mailboxd restarts is retried within seconds.

postconf -e \
    "compatibility_level = 3.6" \
    "maillog_file = /dev/stdout" \
    "myhostname = $hostname" \
    "mydomain = $domain" \
    "myorigin = \$myhostname" \
    "smtpd_banner = \$myhostname ESMTP" \
    "inet_interfaces = all" \
    "inet_protocols = ipv4" \
    "mynetworks_style = subnet" \
    "virtual_mailbox_domains = $domain" \
    "virtual_mailbox_maps =" \
    "virtual_alias_maps =" \
    "virtual_transport = lmtp:$lmtp" \
    "mydestination =" \
    "local_recipient_maps =" \
    "local_transport = error:local delivery is disabled in this demo" \
    "alias_maps =" \
    "alias_database =" \
    "relay_domains =" \
    "relayhost =" \
    "default_transport = error:outbound mail is disabled in this demo" \
    "relay_transport = error:outbound mail is disabled in this demo" \
    "smtp_dns_support_level = disabled" \
    "lmtp_dns_support_level = disabled" \
    "smtp_host_lookup = native" \
    "lmtp_host_lookup = native" \
    "smtpd_peername_lookup = no" \
    "smtputf8_enable = yes" \
    "queue_run_delay = 2s" \
    "minimal_backoff_time = 2s" \
    "maximal_backoff_time = 5s" \
    "maximal_queue_lifetime = 5m" \
    "bounce_queue_lifetime = 5m" \
    "lmtp_connect_timeout = 5s"

# No chroot: the daemons would need copies of /etc/hosts, resolv.conf and nsswitch.conf in the queue directory
# (Debian's init script makes them; `postfix start-fg` does not), and lmtp could not resolve mailboxd.
postconf -F '*/*/chroot = n'
[[ -n $(postconf -M postlog/unix-dgram 2>/dev/null) ]] \
    || { echo "postfix-entrypoint: master.cf has no postlog service (needed for maillog_file)" >&2; exit 1; }

# Postfix re-reads a main.cf written within the last second or two until it settles: backdate it.
touch -d '-10 seconds' "$config_dir/main.cf" "$config_dir/master.cf"
echo "postfix-entrypoint: $hostname takes mail for @$domain on port 25 and delivers it to lmtp:$lmtp"
exec postfix start-fg
