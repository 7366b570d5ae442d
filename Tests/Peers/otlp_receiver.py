r"""An OTLP/HTTP trace receiver on opentelemetry-proto (the OpenTelemetry project's own generated protobuf classes):
what a collector's `otlp` receiver does with an export, kept to decoding and remembering.

Usage: otlp_receiver.py [--discard] — binds 127.0.0.1 port 0 and prints the port on its first line of output.
With --discard (a collector elsewhere, for the benchmark) a POST is read, counted and answered 200 undecoded.
- POST /v1/traces, `application/x-protobuf` or `application/json` (OTLP's JSON encoding: ids as hex, the message's
  fields by their JSON names; a field the schema does not have is refused, 400): decoded into an
  ExportTraceServiceRequest and kept; answers an ExportTraceServiceResponse in the request's encoding.
- GET /spans: every span kept, as JSON: {traceId, spanId, parentSpanId, name, kind, start, end, attributes {key:
  value}, links [{traceId, spanId}], status, resource {key: value}}, ids in hex, times in nanoseconds.
- GET /requests: {"accepted": N, "refused": M}.
"""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

lock = threading.Lock()
spans = []
counts = {"accepted": 0, "refused": 0, "bytes": 0}
discard = "--discard" in sys.argv[1:]


def hex_to_base64(value):
    return base64.b64encode(bytes.fromhex(value)).decode() if value else value


def ids_to_base64(document):
    """OTLP's JSON writes trace and span ids in hex where protobuf's JSON mapping has base64."""
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = hex_to_base64(span[key])
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = hex_to_base64(link[key])
    return document


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def keep(request):
    with lock:
        for resource_spans in request.resource_spans:
            resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        {
                            "traceId": span.trace_id.hex(),
                            "spanId": span.span_id.hex(),
                            "parentSpanId": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": {a.key: value_of(a.value) for a in span.attributes},
                            "links": [{"traceId": l.trace_id.hex(), "spanId": l.span_id.hex()} for l in span.links],
                            "status": span.status.code,
                            "resource": resource,
                            "scope": scope_spans.scope.name,
                        }
                    )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path != "/v1/traces":
            return self.answer(404, b"{}")
        if discard:
            with lock:
                counts["accepted"] += 1
                counts["bytes"] += len(body)
            return self.answer(200, b"{}")
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        request = ExportTraceServiceRequest()
        try:
            if content_type == "application/x-protobuf":
                request.ParseFromString(body)
            elif content_type == "application/json":
                json_format.ParseDict(ids_to_base64(json.loads(body)), request)
            else:
                return self.answer(415, b'{"message":"unsupported content type"}')
        except Exception as error:  # a body the schema does not take
            with lock:
                counts["refused"] += 1
            return self.answer(400, json.dumps({"message": str(error)[:300]}).encode())
        keep(request)
        with lock:
            counts["accepted"] += 1
        response = ExportTraceServiceResponse()
        if content_type == "application/json":
            self.answer(200, json_format.MessageToJson(response).encode())
        else:
            self.answer(200, response.SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        with lock:
            if self.path == "/spans":
                return self.answer(200, json.dumps(spans).encode())
            if self.path == "/requests":
                return self.answer(200, json.dumps(counts).encode())
        self.answer(404, b"{}")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
