"""failover: what the synchronous standby costs: durable deliveries/s from 32 senders through 3 mailboxd on a
pg_auto_failover cluster (Scripts/postgres-cluster) with its standby in the write quorum (every acknowledged commit
is on both machines) ÷ the same cluster with the standby asynchronous, rounds alternating."""
from .. import harness
from ..report import emit, paired
from . import freshness as runs
from .scale import ACCOUNTS, DEVICES_PER_ACCOUNT, SENDERS, start_delivery_load, wrk_deliveries


def run(env):
    seconds, rounds = env.by_mode(10, 30), 3
    cluster = harness.FailoverCluster(env.bin, prefix="signalfetch-bench-failover-")
    users = runs.users(ACCOUNTS)
    try:
        wrk_env = start_delivery_load(cluster, users, DEVICES_PER_ACCOUNT, "failover")

        def through():
            return wrk_deliveries(cluster.ports, SENDERS, seconds, wrk_env, "failover")

        def replicate(mode):
            out = cluster.postgres("synchronous", mode)
            if out.returncode != 0:
                raise RuntimeError(f"failover: synchronous {mode}: {out.stderr}")

        through()  # warm-up
        synchronous, asynchronous = [], []
        for _ in range(rounds):
            replicate("on")
            synchronous.append(through())
            replicate("off")
            asynchronous.append(through())
        replicate("on")
    finally:
        cluster.close()
    emit(paired("failover-synchronous", f"Durable deliveries/s, {SENDERS} senders, 3 mailboxd on a pg_auto_failover "
                "cluster: synchronous standby vs asynchronous", "deliveries/s",
                "standby in the write quorum (an acknowledged commit is on both nodes)", synchronous,
                "the same cluster, standby asynchronous", asynchronous, 0.7, accounts=ACCOUNTS,
                devices=ACCOUNTS * DEVICES_PER_ACCOUNT))
