"""Freshness runs shared by the sections: devices on a started topology, deliveries at a Poisson rate, convergence,
and the ms from each delivery's 201 to each of its account's devices' covering sync."""
from .. import harness, measure


def users(count, prefix="user"):
    return [f"{prefix}{i:03d}" for i in range(count)]


def run(cluster, accounts, per_account, deliveries, rate, seed, label, service="apns", letter="d"):
    """Starts `per_account` devices per account, delivers, waits for convergence; (clients, sent, samples, early)."""
    clients = harness.start_devices(cluster, accounts, per_account, service=service, letter=letter)
    sent = harness.deliver_poisson(cluster.api(), cluster, accounts, deliveries, rate, seed=seed)
    harness.converge(cluster, clients, accounts, 60, label)
    samples, early = measure.freshness(clients, sent)
    return clients, sent, samples, early
