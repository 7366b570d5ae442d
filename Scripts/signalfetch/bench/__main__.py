"""python3 -m signalfetch.bench SECTION --mode quick|full --out DIR: one section of Scripts/bench; prints one JSON
row per figure on standard output."""
import argparse

from .. import harness
from . import (apps, apns, connections, console, e2e, failover, fcm, imap, ingest, jmap_ws, live, reload, scale,
               streams, transport, webpush)
from .env import Env

SECTIONS = {"transport": transport.run, "apns": apns.run, "apns-sim": apns.apns_sim, "fcm": fcm.run,
            "webpush": webpush.run, "console": console.run, "e2e": e2e.run, "live": live.run, "ingest": ingest.run,
            "imap": imap.run, "scale": scale.run, "failover": failover.run, "connections": connections.run, "streams": streams.run,
            "apps": apps.run, "jmap-ws": jmap_ws.run, "reload": reload.run}


def main():
    parser = argparse.ArgumentParser(prog="signalfetch.bench")
    parser.add_argument("benchmark", choices=list(SECTIONS))
    parser.add_argument("--mode", default="quick", choices=["quick", "full"])
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()
    harness.raise_fd_limit()
    env = Env(args.mode, args.out)
    try:
        SECTIONS[args.benchmark](env)
    finally:
        env.close()


if __name__ == "__main__":
    main()
