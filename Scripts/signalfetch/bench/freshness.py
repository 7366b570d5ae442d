"""Freshness runs shared by the sections: a started topology, devices on it, deliveries at a Poisson rate, convergence,
and the ms from each delivery's 201 to each of its account's devices' covering sync."""
import contextlib

from .. import harness, measure
from ..report import latency_row


def users(count, prefix="user"):
    return [f"{prefix}{i:03d}" for i in range(count)]


def push_sim_flags(cluster, service):
    """Starts `service`'s simulator when it is fcm or webpush (apns-sim runs anyway); mailboxd's flags for it."""
    if service == "fcm":
        cluster.start_fcm_sim()
        return ["--fcm-config", cluster.fcm_config]
    if service == "webpush":
        cluster.start_webpush_sim()
        return cluster.webpush_flags
    return []


@contextlib.contextmanager
def topology(env, label, accounts, service="apns", add=None):
    """A topology with `accounts` (added by `add(cluster, accounts)` when given), apns-sim, `service`'s simulator
    and mailboxd started; closed on leaving."""
    cluster = env.topology(label)
    try:
        if add:
            add(cluster, accounts)
        else:
            cluster.add_accounts(accounts)
        cluster.start_apns_sim()
        cluster.start_mailboxd(extra=push_sim_flags(cluster, service))
        yield cluster
    finally:
        cluster.close()


def run(cluster, accounts, per_account, deliveries, rate, seed, label, service="apns", letter="d"):
    """Starts `per_account` devices per account, delivers, waits for convergence; (clients, sent, samples, early)."""
    clients = harness.start_devices(cluster, accounts, per_account, service=service, letter=letter)
    sent = harness.deliver_poisson(cluster.api(), cluster, accounts, deliveries, rate, seed=seed)
    harness.converge(cluster, clients, accounts, 60, label)
    samples, early = measure.freshness(clients, sent)
    return clients, sent, samples, early


def service_row(env, service, letter, seed, title, finding, accounts=50, per_account=2, deliveries=500, rate=50.0,
                goal_p99=25.0):
    """Freshness through `service`'s simulator (fcm, webpush) end to end, on a topology of its own; its latency row."""
    names = users(accounts)
    with topology(env, f"{service}-e2e", names, service) as cluster:
        clients, _, samples, early = run(cluster, names, per_account, deliveries, rate, seed, f"{service} e2e",
                                         service=service, letter=letter)
        return latency_row(f"{service}-e2e-freshness", title, samples, goal_p99, finding,
                           devices=len(clients.devices), accounts=accounts, deliveries=deliveries, offered_rate=rate,
                           synced_before_201=early, signals_received=sum(d.signals for d in clients.devices))
