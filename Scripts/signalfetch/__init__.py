"""The Python behind Scripts/bench, Scripts/drills and Scripts/demo. Standard library only (the reference clients and
the console screenshot in peers/ run in the test venv, made by Scripts/venv).

  harness   processes, ports, TLS material and the local topology (dev-setup, accounts, apns-sim, fcm-sim,
            webpush-sim, mailboxd on SQLite or PostgreSQL, simulated devices): the one launcher every caller uses
  measure   percentiles, CPU from /proc, the load tools' figures (wrk, h2load), freshness
  idle      idle TLS connections held from several processes and source addresses (holder processes)
  report    the figure rows written to bench-results/results.jsonl and the report made from them
  bench     one module per benchmark section (python3 -m signalfetch.bench SECTION)
  drills    failure drills (python3 -m signalfetch.drills)
  demo      the signal-then-fetch loop on one machine (python3 -m signalfetch.demo)
  profile   a CPU profile of mailboxd under load (python3 -m signalfetch.profile)

The shell entry points (Scripts/bench, Scripts/drills, Scripts/demo) put Scripts/ on PYTHONPATH."""
import functools
import os
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
PEERS = os.path.join(ROOT, "Tests", "Peers")
TOPIC = "com.example.signalfetch"


def data_path(name):
    """A file of data/ (wrk's Lua scripts, pgbench's and psql's SQL), by path."""
    return os.path.join(DATA, name)


def peer_path(name):
    """A script of Tests/Peers, the one copy of each real client (run by the test venv's interpreter): the benchmarks'
    reference clients are the tests' peers in their `load` mode, and the demo's console screenshot is there too."""
    return os.path.join(PEERS, name)


@functools.cache
def test_python():
    """The Python of the test venv (.venv, made or brought up to date by Scripts/venv once per process): the real peers
    and clients."""
    subprocess.run([os.path.join(SCRIPTS, "venv"), "test"], check=True)
    return os.path.join(ROOT, ".venv", "bin", "python3")


def log(text):
    print(text, file=sys.stderr, flush=True)
