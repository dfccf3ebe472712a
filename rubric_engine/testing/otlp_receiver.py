"""An OTLP/HTTP logs receiver on loopback that decodes what it gets, for tests and demos.

No OpenTelemetry Collector installs from PyPI, and Phoenix answers 405 to OTLP logs, so the
tests of ``rubric-eval emit --otlp`` send to this: ``POST /v1/logs`` with a protobuf
``ExportLogsServiceRequest`` (``application/x-protobuf``, gzip or not) is decoded with the
``opentelemetry-proto`` package — the same message definitions a collector uses — and each
log record is kept as a plain :class:`Received` value. Any other path answers 404; a body that
does not decode answers 400, as a collector would.

    python -m rubric_engine.testing.otlp_receiver --port 4318   # prints each event's summary
"""

from __future__ import annotations

import argparse
import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from rubric_engine.testing.loopback_http import LoopbackHTTP


@dataclass(frozen=True)
class Received:
    """One log record as received: the event name, trace and span ids (hex, ``""`` when
    unset), attributes as plain values (arrays as lists) and the resource's attributes."""

    event_name: str
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def decode_logs(body: bytes) -> list[Received]:
    """The log records of a protobuf ``ExportLogsServiceRequest``.

    Raises:
        google.protobuf.message.DecodeError: the body is not one.
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_logs in request.resource_logs:
        resource = {kv.key: _value(kv.value) for kv in resource_logs.resource.attributes}
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                out.append(Received(
                    record.event_name, record.trace_id.hex(), record.span_id.hex(),
                    {kv.key: _value(kv.value) for kv in record.attributes}, resource,
                ))  # fmt: skip
    return out


class OtlpReceiver(LoopbackHTTP):
    """The receiver; use as a context manager. ``endpoint`` is its ``http://127.0.0.1:PORT``;
    :attr:`records` holds every record received, in arrival order."""

    def __init__(self, port: int = 0) -> None:
        self.records: list[Received] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/logs":
                    self._answer(404, b"only /v1/logs is received here")
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    records = decode_logs(body)
                except Exception as exc:  # DecodeError: answer as a collector does
                    self._answer(400, f"not an ExportLogsServiceRequest: {exc}".encode())
                    return
                with receiver._lock:
                    receiver.records.extend(records)
                    receiver.requests += 1
                self._answer(200, b"", "application/x-protobuf")

            def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._listen(Handler, port)

    @property
    def endpoint(self) -> str:
        return self.base_url.removesuffix("/v1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    import time

    with OtlpReceiver(args.port) as receiver:
        print(f"receiving OTLP logs at {receiver.endpoint}/v1/logs", flush=True)
        seen = 0
        while True:
            time.sleep(0.2)
            for record in receiver.records[seen:]:
                attrs = record.attributes
                print(f"{record.event_name} span={record.span_id or '-'} "
                      f"{attrs.get('gen_ai.evaluation.name')}="
                      f"{attrs.get('gen_ai.evaluation.score.value')} "
                      f"{attrs.get('gen_ai.evaluation.score.label')}", flush=True)  # fmt: skip
            seen = len(receiver.records)


if __name__ == "__main__":
    main()
