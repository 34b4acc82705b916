"""An OTLP/HTTP trace receiver for TracingTests: accepts POST /v1/traces with a JSON body, checks it
against the OpenTelemetry project's own protobuf definitions (opentelemetry-proto, pinned in
scripts/python-tools) and records what it got.

Each body is parsed strictly (unknown fields refused) into ExportTraceServiceRequest with
google.protobuf.json_format.Parse. OTLP/JSON differs from the proto3 JSON mapping in one point
(OTLP specification, "JSON Protobuf Encoding"): trace and span ids are hex, not base64; they are
checked as hex of the right length and turned into base64 before parsing. A body that fails is
answered 400 and recorded as an error.

Usage: python otlp_receiver.py RECORD_FILE
Prints {"event": "listening", "port": N} once listening on 127.0.0.1. Appends one JSON line per
request to RECORD_FILE: {"spans": [...]} (ids in hex, attributes as a flat object) or {"error": "..."}.
"""

import base64
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

RECORD = sys.argv[1]
LOCK = threading.Lock()
ID_LENGTHS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


def hex_ids_to_base64(node):
    """Replaces the hex ids of spans (and of their links) by base64, checking each one."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ID_LENGTHS and isinstance(value, str):
                raw = bytes.fromhex(value) if value else b""
                if value and (len(raw) != ID_LENGTHS[key] or value != value.lower()):
                    raise ValueError(f"{key} {value!r} is not {ID_LENGTHS[key]} bytes of lower-case hex")
                if key != "parentSpanId" and not value:
                    raise ValueError(f"{key} is empty")
                node[key] = base64.b64encode(raw).decode()
            else:
                hex_ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            hex_ids_to_base64(item)


def any_value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def flatten(request):
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: any_value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "traceId": span.trace_id.hex(),
                        "spanId": span.span_id.hex(),
                        "parentSpanId": span.parent_span_id.hex(),
                        "traceState": span.trace_state,
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "status": span.status.code,
                        "attributes": {a.key: any_value(a.value) for a in span.attributes},
                    }
                )
    return spans


def record(entry):
    with LOCK, open(RECORD, "a") as out:
        out.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"path {self.path}")
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                raise ValueError(f"Content-Type {self.headers.get('Content-Type')}")
            document = json.loads(body)
            hex_ids_to_base64(document)
            request = json_format.Parse(json.dumps(document), ExportTraceServiceRequest(), ignore_unknown_fields=False)
            record({"spans": flatten(request)})
        except Exception as error:  # noqa: BLE001 - every failure is the test's finding
            record({"error": f"{type(error).__name__}: {error}"})
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"code": 3, "message": "invalid"}')
            return
        answer = json_format.MessageToJson(ExportTraceServiceResponse()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write("otlp_receiver: " + (format % args) + "\n")


# The test stops the receiver with SIGTERM; the parent may have spawned it with signals blocked.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"event": "listening", "port": server.server_address[1]}), flush=True)
server.serve_forever()
