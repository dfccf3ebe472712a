"""A loopback fake of OpenAI's files and batches endpoints, for tests, demos and benchmarks.

It serves, on ``127.0.0.1`` only and over real sockets, what litellm's ``acreate_file``,
``acreate_batch``, ``aretrieve_batch``, ``acancel_batch``, ``alist_batches`` and
``afile_content`` call with ``custom_llm_provider="openai"`` and an ``api_base``:

    POST /v1/files                 multipart upload (purpose=batch), returns a file object
    GET  /v1/files/{id}            the file object
    GET  /v1/files/{id}/content    the file's bytes (input, output and error files)
    POST /v1/batches               create a batch from an uploaded input file
    GET  /v1/batches/{id}          retrieve (advances the batch's state, see below)
    POST /v1/batches/{id}/cancel   cancel
    GET  /v1/batches               list, newest first (``limit``, ``after``)
    POST /v1/chat/completions      the same answers, live (``--batch-fallback live`` runs)

A batch walks ``validating → in_progress → finalizing → completed`` on the clock, each step
lasting its :class:`Delays` value. A :data:`FatePlan` decides, per batch in submission order,
whether it completes, **expires** (only the first lines are answered; the rest are in the error
file with code ``batch_expired``) or **fails** validation (no output at all). A batch is also
failed, as OpenAI fails it, when its input breaks the limits (:class:`Limits`: lines, bytes) or
repeats a ``custom_id``. A line whose answer has an HTTP status other than 200 goes to the
error file (a *partially failed* batch: completed, with ``request_counts.failed`` > 0).

Each input line is answered by a :data:`~rubric_engine.testing.openai_stub.Responder` from its
request body, the same pluggable answer function the chat stub takes (verdicts by rowId, a
script per row, a cassette). Every batch creation is logged in :attr:`BatchStub.submissions`
(and appended to ``log_path`` when given) with its input file's ``custom_id`` values, so a test
can prove that nothing was submitted twice (:meth:`BatchStub.duplicate_custom_ids`).

    python -m rubric_engine.testing.batch_stub --verdicts cases/verdicts/health_cs.jsonl --port 8766
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from rubric_engine.testing.loopback_http import LoopbackHTTP
from rubric_engine.testing.openai_stub import (
    Responder,
    StubReply,
    completion,
    load_verdicts,
    verdicts_responder,
)

FateKind = Literal["completed", "expired", "failed"]
_COUNTS = ("total", "completed", "failed")


@dataclass(frozen=True)
class Fate:
    """What becomes of one batch.

    Attributes:
        kind: ``completed``, ``expired`` (the window ran out) or ``failed`` (validation).
        answered: for ``expired``, how many of the first lines were answered (0 = none).
    """

    kind: FateKind = "completed"
    answered: int = 0


#: ``(batch number from 1 in submission order, line count) -> Fate``
FatePlan = Callable[[int, int], Fate]


def always_complete(number: int, lines: int) -> Fate:
    return Fate()


@dataclass(frozen=True)
class Delays:
    """Seconds a batch spends in each state before it moves on (all 0: done at the first poll)."""

    validating_s: float = 0.0
    in_progress_s: float = 0.0
    finalizing_s: float = 0.0


@dataclass(frozen=True)
class Limits:
    """OpenAI's per-batch input limits (50,000 requests, 200 MB); smaller ones in tests."""

    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024


@dataclass
class _Batch:
    id: str
    number: int
    input_file_id: str
    endpoint: str
    metadata: dict[str, Any] | None
    created: float
    fate: Fate
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))
    stamps: dict[str, int] = field(default_factory=dict)


class BatchStub(LoopbackHTTP):
    """The server. Use as a context manager; ``base_url`` ends in ``/v1``.

    Args:
        responder: answers each request line (and each live chat request) from its body.
        fate: decides each batch's end; default: every batch completes.
        delays: time in each state.
        limits: input limits; a batch over them fails validation.
        port: 0 picks a free port.
        log_path: when given, each submission is appended there as one JSON line (for runs
            where the client is another process that a test kills).
        clock: seconds, monotonic; the states advance by it (a test may step it by hand).
        faults: step (:func:`step_of`) -> HTTP status: every request of that step is refused
            with it, the error quoting the request's path and headers.
    """

    def __init__(
        self,
        responder: Responder,
        fate: FatePlan = always_complete,
        delays: Delays = Delays(),
        limits: Limits = Limits(),
        port: int = 0,
        log_path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        faults: dict[str, int] | None = None,
    ) -> None:
        self.responder = responder
        #: step (:func:`step_of`) -> the HTTP status every request of that step is answered
        #: with; the error quotes the request's path and headers, as some providers do
        self.faults = dict(faults or {})
        self.clock = clock
        self.fate = fate
        self.delays = delays
        self.limits = limits
        self.log_path = log_path
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.submissions: list[dict[str, Any]] = []
        #: ``(method, path)`` of every HTTP request, in arrival order
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.RLock()
        self._ids = Counter[str]()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                with stub._lock:
                    stub.requests.append((method, url.path))
                fault = stub.faults.get(step_of(method, url.path))
                if fault is not None:
                    headers = dict(self.headers.items())
                    echo = f"refused (request to {self.path}; headers: {headers})"
                    self._send(fault, json.dumps({"error": {"message": echo}}).encode(), None)
                    return
                status, payload = stub.handle(
                    method, url.path, parse_qs(url.query), self.headers.get("Content-Type"), raw
                )
                if isinstance(payload, bytes):
                    self._send(status, payload, "application/octet-stream")
                else:
                    self._send(status, json.dumps(payload, ensure_ascii=False).encode(), None)

            def _send(self, status: int, data: bytes, kind: str | None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind or "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._listen(Handler, port)

    # -- what tests read -----------------------------------------------------------------------

    def submitted_custom_ids(self) -> Counter[str]:
        """How many times each ``custom_id`` was in a created batch."""
        with self._lock:
            return Counter(c for s in self.submissions for c in s["customIds"])

    def duplicate_custom_ids(self) -> list[str]:
        """``custom_id`` values that were in more than one created batch (should be none)."""
        return sorted(c for c, n in self.submitted_custom_ids().items() if n > 1)

    # -- the endpoints -------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], kind: str | None, raw: bytes
    ) -> tuple[int, dict[str, Any] | bytes]:
        """One request → (HTTP status, JSON payload or raw bytes)."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["v1"]:
            parts = parts[1:]
        with self._lock:
            if method == "POST" and parts == ["files"]:
                return self._upload(kind, raw)
            if method == "GET" and len(parts) == 2 and parts[0] == "files":
                found = self.files.get(parts[1])
                return (200, found) if found else _missing("file", parts[1])
            if method == "GET" and parts[:1] == ["files"] and parts[2:] == ["content"]:
                data = self.contents.get(parts[1])
                return (200, data) if data is not None else _missing("file", parts[1])
            if method == "POST" and parts == ["batches"]:
                return self._create(raw)
            if method == "GET" and parts == ["batches"]:
                return 200, self._list(query)
            if len(parts) >= 2 and parts[0] == "batches" and parts[1] in self.batches:
                batch = self.batches[parts[1]]
                if method == "GET" and len(parts) == 2:
                    return 200, self._view(self._advance(batch))
                if method == "POST" and parts[2:] == ["cancel"]:
                    return 200, self._view(self._cancel(batch))
            if len(parts) >= 2 and parts[0] == "batches":
                return _missing("batch", parts[1])
        if method == "POST" and parts == ["chat", "completions"]:
            body = json.loads(raw or b"{}")
            reply = self.responder(body)
            if reply.status != 200:
                return reply.status, {"error": {"message": reply.content, "type": "stub_error"}}
            return 200, completion(body, reply)
        return 404, {"error": {"message": f"unknown endpoint {method} {path}"}}

    def _new_id(self, prefix: str) -> str:
        self._ids[prefix] += 1
        return f"{prefix}-stub-{self._ids[prefix]:06d}"

    def _store_file(self, data: bytes, name: str, purpose: str) -> dict[str, Any]:
        file_id = self._new_id("file")
        self.contents[file_id] = data
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }
        return self.files[file_id]

    def _upload(self, kind: str | None, raw: bytes) -> tuple[int, dict[str, Any]]:
        if not kind or not kind.startswith("multipart/form-data"):
            return 400, {"error": {"message": "POST /v1/files takes multipart/form-data"}}
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + kind.encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            fields[str(name)] = (part.get_filename(), data)
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return 400, {"error": {"message": "upload needs a file and purpose=batch"}}
        filename, data = fields["file"]
        return 200, self._store_file(data, filename or "input.jsonl", "batch")

    def _create(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        body = json.loads(raw or b"{}")
        file_id = str(body.get("input_file_id"))
        if file_id not in self.contents:
            return _missing("file", file_id)
        if body.get("endpoint") != "/v1/chat/completions":
            return 400, {"error": {"message": "this fake serves /v1/chat/completions batches"}}
        lines = [json.loads(x) for x in self.contents[file_id].splitlines() if x.strip()]
        number = len(self.batches) + 1
        batch = _Batch(
            id=self._new_id("batch"),
            number=number,
            input_file_id=file_id,
            endpoint=body["endpoint"],
            metadata=body.get("metadata"),
            created=self.clock(),
            fate=self.fate(number, len(lines)),
        )
        batch.stamps["created_at"] = int(time.time())
        batch.counts["total"] = len(lines)
        self.batches[batch.id] = batch
        submission = {
            "batchId": batch.id,
            "inputFileId": file_id,
            "metadata": batch.metadata,
            "customIds": [str(line.get("custom_id")) for line in lines],
        }
        self.submissions.append(submission)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(submission) + "\n")
        return 200, self._view(batch)

    def _list(self, query: dict[str, list[str]]) -> dict[str, Any]:
        ordered = sorted(self.batches.values(), key=lambda b: -b.number)
        after = (query.get("after") or [""])[0]
        if after in self.batches:
            ordered = [b for b in ordered if b.number < self.batches[after].number]
        limit = int((query.get("limit") or ["20"])[0])
        page = ordered[:limit]
        return {
            "object": "list",
            "data": [self._view(b) for b in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": len(ordered) > limit,
        }

    # -- the state machine ---------------------------------------------------------------------

    def _advance(self, batch: _Batch) -> _Batch:
        """Move a batch along by the clock; the answers are made when it finalizes."""
        if batch.status not in ("validating", "in_progress", "finalizing"):
            return batch
        age = self.clock() - batch.created
        d = self.delays
        if batch.status == "validating" and age >= d.validating_s:
            problem = self._invalid(batch)
            if problem is not None or batch.fate.kind == "failed":
                batch.status = "failed"
                batch.stamps["failed_at"] = int(time.time())
                batch.errors = {
                    "object": "list",
                    "data": [problem or {"code": "invalid_request", "message": "failed (fate)"}],
                }
                return batch
            batch.status = "in_progress"
            batch.stamps["in_progress_at"] = int(time.time())
        if batch.status == "in_progress" and age >= d.validating_s + d.in_progress_s:
            if batch.fate.kind == "expired":
                batch.stamps["expired_at"] = int(time.time())
                self._answer(batch, batch.fate.answered, "expired")
                return batch
            batch.status = "finalizing"
            batch.stamps["finalizing_at"] = int(time.time())
        done_at = d.validating_s + d.in_progress_s + d.finalizing_s
        if batch.status == "finalizing" and age >= done_at:
            batch.stamps["completed_at"] = int(time.time())
            self._answer(batch, None, "completed")
        return batch

    def _cancel(self, batch: _Batch) -> _Batch:
        if batch.status in ("validating", "in_progress", "finalizing"):
            batch.stamps["cancelled_at"] = int(time.time())
            self._answer(batch, 0, "cancelled")
        return batch

    def _invalid(self, batch: _Batch) -> dict[str, Any] | None:
        data = self.contents[batch.input_file_id]
        lines = [json.loads(x) for x in data.splitlines() if x.strip()]
        if len(lines) > self.limits.max_requests:
            return {
                "code": "too_many_requests",
                "message": f"{len(lines)} requests; at most {self.limits.max_requests}",
            }
        if len(data) > self.limits.max_bytes:
            return {"code": "file_too_large", "message": f"{len(data)} bytes"}
        seen = Counter(str(line.get("custom_id")) for line in lines)
        twice = [c for c, n in seen.items() if n > 1]
        if twice:
            return {"code": "duplicate_custom_id", "message": f"custom_id {twice[0]} repeats"}
        return None

    def _answer(self, batch: _Batch, answered: int | None, status: str) -> None:
        """Answer the first ``answered`` lines (all when ``None``); the rest did not run."""
        lines = [json.loads(x) for x in self.contents[batch.input_file_id].splitlines() if x]
        out, err = [], []
        for n, line in enumerate(lines):
            custom_id, body = line.get("custom_id"), line.get("body") or {}
            request_id = f"req-{batch.id}-{n}"
            if answered is not None and n >= answered:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append(
                    {
                        "id": request_id,
                        "custom_id": custom_id,
                        "response": None,
                        "error": {"code": code, "message": f"the batch was {status} first"},
                    }
                )
                continue
            reply: StubReply = self.responder(body)
            if reply.status != 200:
                err.append(
                    {
                        "id": request_id,
                        "custom_id": custom_id,
                        "response": {
                            "status_code": reply.status,
                            "request_id": request_id,
                            "body": {"error": {"message": reply.content, "type": "stub_error"}},
                        },
                        "error": None,
                    }
                )
                continue
            out.append(
                {
                    "id": request_id,
                    "custom_id": custom_id,
                    "response": {
                        "status_code": 200,
                        "request_id": request_id,
                        "body": completion(body, reply),
                    },
                    "error": None,
                }
            )
        if out:
            data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out).encode()
            batch.output_file_id = self._store_file(data, "output.jsonl", "batch_output")["id"]
        if err:
            data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in err).encode()
            batch.error_file_id = self._store_file(data, "errors.jsonl", "batch_output")["id"]
        batch.counts = {"total": len(lines), "completed": len(out), "failed": len(err)}
        batch.status = status

    def _view(self, batch: _Batch) -> dict[str, Any]:
        """The batch as OpenAI's ``Batch`` object."""
        stamps = {
            k: batch.stamps.get(k)
            for k in (
                "in_progress_at",
                "finalizing_at",
                "completed_at",
                "failed_at",
                "expired_at",
                "cancelled_at",
            )
        }
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": batch.errors,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": batch.stamps["created_at"],
            "expires_at": batch.stamps["created_at"] + 86400,
            **stamps,
            "request_counts": dict(batch.counts),
            "metadata": batch.metadata,
        }


def step_of(method: str, path: str) -> str:
    """The batch step a request is: ``upload``, ``create``, ``retrieve``, ``cancel``, ``list``,
    ``content``, ``file`` or ``chat`` (``BatchStub(faults=…)`` keys)."""
    parts = [p for p in path.split("/") if p and p != "v1"]
    if parts[:1] == ["files"]:
        return "upload" if method == "POST" else "content" if parts[2:] == ["content"] else "file"
    if parts[:1] == ["batches"]:
        if len(parts) == 1:
            return "create" if method == "POST" else "list"
        return "cancel" if parts[2:] == ["cancel"] else "retrieve"
    return "chat"


def _missing(what: str, ident: str) -> tuple[int, dict[str, Any]]:
    return 404, {"error": {"message": f"no such {what}: {ident}", "type": "invalid_request_error"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=Path, required=True, help="JSONL verdicts with rowId")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--in-progress-s", type=float, default=1.0, help="seconds each batch runs")
    parser.add_argument("--log", type=Path, help="append each submission here (JSONL)")
    args = parser.parse_args()
    stub = BatchStub(
        verdicts_responder(load_verdicts(args.verdicts)),
        delays=Delays(in_progress_s=args.in_progress_s),
        port=args.port,
        log_path=args.log,
    )
    print(f"batch fake on {stub.base_url} (Ctrl-C stops)", flush=True)
    stub.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stub.stop()


if __name__ == "__main__":
    main()
