"""A Python peer for HTTP2ServerTests: httpx with HTTP/2. Arguments: `tls URL CA` or `h2c URL`. Prints `<http_version> <status> <body>`."""
import sys
import httpx

mode, url = sys.argv[1], sys.argv[2]
if mode == "tls":
    client = httpx.Client(http2=True, verify=sys.argv[3])
else:
    client = httpx.Client(http1=False, http2=True)
with client:
    response = client.post(url, content=b"ping" * 8)
    print(response.http_version, response.status_code, response.text)
