"""transport: HTTPServer vs nginx (wrk), HTTP2Server vs nghttpd (h2load), the HTTP clients vs h2load.

Short rounds, many of them, ours and the baseline back to back in each: both sides see the same moments of a noisy
machine, and the figure is the median round's ratio with the spread of all rounds beside it."""
import os

from ..measure import h2load, median, run_json, wrk
from ..report import emit, paired


def http1(env, seconds, rounds):
    """HTTPServer vs nginx, HTTP/1.1 keep-alive, plain HTTP."""
    ours_proc, ours_port = env.serve("serve-http", tls=False)
    nginx_proc, nginx_port = env.nginx()
    ours, base = [], []
    for _ in range(rounds):
        ours.append(wrk(f"http://127.0.0.1:{ours_port}/status.json", seconds))
        base.append(wrk(f"http://127.0.0.1:{nginx_port}/status.json", seconds))
    emit(paired("transport-http1", "HTTPServer tiny-JSON GET, HTTP/1.1 keep-alive (wrk -t1 -c32)", "req/s",
                "HTTPServer", [r["rate"] for r in ours], "nginx (static file)", [r["rate"] for r in base], 0.5,
                ours_p99_ms=max(r["p99_ms"] or 0 for r in ours), ours_non2xx=sum(r["non2xx"] for r in ours)))
    env.stop(ours_proc)
    env.stop(nginx_proc)


def http2(env, seconds, rounds, ng_port):
    """HTTP2Server vs nghttpd, h2load -c1 -m100 over TLS."""
    h2_proc, h2_port = env.serve("serve-h2")
    ours, base = [], []
    for _ in range(rounds):
        ours.append(h2load(f"https://127.0.0.1:{h2_port}/status.json", seconds))
        base.append(h2load(f"https://127.0.0.1:{ng_port}/status.json", seconds))
    emit(paired("transport-http2", "HTTP2Server tiny-JSON GET over TLS (h2load -c1 -m100)", "req/s",
                "HTTP2Server", [r["rate_2xx"] for r in ours], "nghttpd", [r["rate_2xx"] for r in base], 0.5))
    env.stop(h2_proc)


def client_load(args, name):
    result = run_json(args)
    if result["failed"]:
        raise RuntimeError(f"{name}: {result['failed']} requests failed")
    return result


def clients(env, seconds, rounds, ng_port):
    """The clients against the same server (nghttpd), one HTTP/2 connection over TLS, 100 requests in flight:
    HTTPClient (libcurl multi), the same libcurl loop written directly in C (the ceiling of any libcurl-based client
    here), HTTP2Client (nghttp2), and h2load, each round all four back to back."""
    count = env.by_mode(10000, 40000)
    url = f"https://127.0.0.1:{ng_port}/status.json"
    curl_c, ours, h2c, base = [], [], [], []
    for _ in range(rounds):
        ours.append(client_load([env.bench, "client-load", "--url", url, "--ca", env.ca, "--count", str(count),
                                 "--concurrency", "100"], "client-load"))
        curl_c.append(client_load([os.path.join(env.bin, "curl-multi-load"), url, env.ca, str(count), "100", "1000"],
                                  "curl-multi-load"))
        h2c.append(client_load([env.bench, "h2client-load", "--url", url, "--ca", env.ca, "--count", str(count * 3),
                                "--concurrency", "100"], "h2client-load"))
        base.append(h2load(url, seconds, warmup=0))
    h2load_rates = [r["rate_2xx"] for r in base]
    emit(paired("transport-client", "HTTPClient (libcurl) GETs over one HTTP/2 connection, 100 concurrent "
                "(server: nghttpd)", "req/s", "HTTPClient", [r["rate"] for r in ours], "h2load -c1 -m100",
                h2load_rates, 0.5, connections=max(r["connections"] for r in ours)))
    emit(paired("transport-client-libcurl", "HTTPClient vs the same libcurl multi loop written in C (the libcurl "
                "ceiling on this machine)", "req/s", "HTTPClient", [r["rate"] for r in ours],
                "libcurl multi loop in C", [r["rate"] for r in curl_c], 0.5,
                libcurl_c_vs_h2load=round(median([c["rate"] / b for c, b in zip(curl_c, h2load_rates)]), 3)))
    emit(paired("transport-http2client", "HTTP2Client (nghttp2) GETs over one HTTP/2 connection, 100 concurrent "
                "(server: nghttpd)", "req/s", "HTTP2Client", [r["rate"] for r in h2c], "h2load -c1 -m100",
                h2load_rates, 0.6, connections=max(r["connections"] for r in h2c)))


def run(env):
    seconds, rounds = env.by_mode(3, 8), env.by_mode(5, 7)
    http1(env, seconds, rounds)
    ng_proc, ng_port = env.nghttpd()
    http2(env, seconds, rounds, ng_port)
    clients(env, seconds, rounds, ng_port)
    env.stop(ng_proc)
