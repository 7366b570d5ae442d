"""A Python peer for HTTP2ServerTests: Uploads a body of unknown length (no content-length) over h2c. Arguments: URL, size. Prints `<status> <body>`, or `error <type>` if the exchange failed."""
import sys
import httpx

url, size = sys.argv[1], int(sys.argv[2])

def chunks():
    sent = 0
    while sent < size:
        piece = min(16384, size - sent)
        sent += piece
        yield b"x" * piece

with httpx.Client(http1=False, http2=True) as client:
    try:
        response = client.post(url, content=chunks())
        print(response.status_code, response.text)
    except Exception as error:
        print("error", type(error).__name__)
