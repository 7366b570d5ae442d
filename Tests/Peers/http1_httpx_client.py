"""httpx over HTTP/1.1 against HTTPServer's test app: GET /hello, then POST /echo with a JSON body, on one client.

Usage: http1_httpx_client.py BASE_URL [CA_FILE] — with CA_FILE the server's certificate must chain to it.
Prints one JSON object: {"get": status, "text": body of /hello, "post": status, "echo": the echoed object,
"version": the HTTP version of the GET, "oneConnection": whether both requests went over one connection}.
"""
import json
import sys

import httpx


def client_address(response):
    stream = response.extensions.get("network_stream")
    return stream.get_extra_info("client_addr") if stream is not None else None


base = sys.argv[1]
verify = sys.argv[2] if len(sys.argv) > 2 else True
with httpx.Client(verify=verify) as client:
    first = client.get(base + "/hello")
    second = client.post(base + "/echo", json={"name": "tls", "count": 1})
    print(json.dumps({
        "get": first.status_code, "text": first.text, "post": second.status_code, "echo": second.json(),
        "version": first.http_version,
        "oneConnection": client_address(first) is not None and client_address(first) == client_address(second),
    }))
