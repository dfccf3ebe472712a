"""A scriptable OpenAI-compatible chat-completions server on loopback, for tests and demos.

It serves ``POST /v1/chat/completions`` on ``127.0.0.1`` only, over real sockets, so the live
judge path (litellm → HTTP → instructor → normalization → store) runs with no provider and no
cassette. A *responder* decides each answer from the request body; helpers build responders
from a file of verdicts keyed by rowId.

    python -m rubric_engine.testing.openai_stub --verdicts verdicts.jsonl --port 8765
    # like llama.cpp's server with a small model (see docs/self-hosted-judge.md):
    python -m rubric_engine.testing.openai_stub --verdicts verdicts.jsonl --drop-system \
        --reject-json-schema --context-limit 16384
    rubric-eval score rows.jsonl -r rubrics/health_cs.yaml --mode live \
        --api-base http://127.0.0.1:8765/v1 --model openai/stub-judge

A :class:`ServerQuirks` makes it behave like a self-hosted server (llama.cpp's server with a
small model): a chat template that drops ``system`` messages (its prompt-token count then
leaves them out), OpenAI's ``json_schema`` response format answered with HTTP 500 while
``json_object`` + ``schema`` is accepted, and a context limit answered with the 400 OpenAI
sends (``This model's maximum context length is N tokens …``).

Every request is kept in ``StubServer.requests`` (headers without ``Authorization``; only
the SHA-256 of its value, as ``authSha256``; the body parsed and as the bytes received, ``raw``),
so tests can count the attempts the server saw, check which key was sent without holding the
key, and compare two clients' requests byte for byte.

``prompt_cache=True`` behaves like OpenAI's automatic prompt caching: a request whose system
message the server has seen before reports that message's tokens as
``usage.prompt_tokens_details.cached_tokens``. :class:`StubServer` is also the HTTP plumbing
of :mod:`rubric_engine.testing.anthropic_stub` (the same server speaking Anthropic Messages):
the protocol lives in :meth:`StubServer.serves`, :meth:`~StubServer.openai_view`,
:meth:`~StubServer.answer` and :meth:`~StubServer.error_payload`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from rubric_engine.testing.loopback_http import LoopbackHTTP

_ROW_ID = re.compile(r"^rowId: (.+)$", re.MULTILINE)
#: where a 200 reply with ``echo_request`` quotes the request (see :class:`StubReply`)
ECHO = "@ECHO@"


@dataclass
class StubReply:
    """One scripted answer.

    Attributes:
        status: HTTP status; non-200 sends an OpenAI-style error body.
        content: the assistant message content (the judge's text).
        tool_calls: OpenAI ``tool_calls`` list, if the verdict comes as a tool call.
        finish_reason: ``stop``, ``length``, ``content_filter`` …
        headers: extra response headers (``Retry-After`` …).
        delay_s: seconds to wait before answering (latency, timeouts).
        usage: token counts; estimated from lengths when omitted.
        refusal: the OpenAI ``message.refusal`` text of a model that declines to answer.
        drop: close the connection without answering (a dropped connection).
        echo_request: the reply quotes the URL path it was sent to and every request header
            (``Authorization`` included), as some providers do ("Incorrect API key provided:
            …"): an error reply adds it to its message; a 200 reply puts it where its content
            says :data:`ECHO` (JSON-escaped). For tests that no credential reaches what
            rubric-eval writes.
        error_code: the OpenAI error ``code`` of a non-200 answer.
    """

    status: int = 200
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    usage: dict[str, int] | None = None
    refusal: str | None = None
    drop: bool = False
    echo_request: bool = False
    error_code: str | None = None


Responder = Callable[[dict[str, Any]], StubReply]


@dataclass(frozen=True)
class ServerQuirks:
    """How a self-hosted server departs from OpenAI's API (all off by default).

    Attributes:
        drop_system: the chat template drops ``system`` messages: they are not counted in
            ``usage.prompt_tokens`` (nor in the context).
        reject_json_schema: ``response_format: {"type": "json_schema"}`` gets HTTP 500.
        context_limit: prompts over this many tokens (characters / 4) get HTTP 400.
    """

    drop_system: bool = False
    reject_json_schema: bool = False
    context_limit: int | None = None
    #: characters per token of this server's tokenizer (tiktoken's is about 4 for English)
    chars_per_token: int = 4
    #: serve llama.cpp's ``POST /tokenize`` (``{"content": …}`` → ``{"tokens": […]}``)
    tokenize: bool = False

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The prompt's size as this server counts it: characters / ``chars_per_token`` of
        what it keeps."""
        kept = [
            m
            for m in body.get("messages") or []
            if not (self.drop_system and m.get("role") == "system")
        ]
        return max(1, sum(len(str(m.get("content") or "")) for m in kept) // self.chars_per_token)

    def requested_tokens(self, body: dict[str, Any]) -> int:
        """The prompt and the room asked for the answer, as a server checks its context."""
        return self.prompt_tokens(body) + int(body.get("max_tokens") or 0)

    def refusal(self, body: dict[str, Any]) -> StubReply | None:
        """The error this server answers ``body`` with, or ``None``."""
        form = (body.get("response_format") or {}).get("type")
        if self.reject_json_schema and form == "json_schema":
            return StubReply(status=500, content="json_schema is not supported by this server")
        tokens = self.requested_tokens(body)
        if self.context_limit is not None and tokens > self.context_limit:
            return StubReply(
                status=400,
                content=f"This model's maximum context length is {self.context_limit} tokens. "
                f"However, you requested {tokens} tokens ({self.prompt_tokens(body)} in the "
                f"messages, {body.get('max_tokens') or 0} in the completion). Please reduce the "
                "length of the messages or completion.",
                error_code="context_length_exceeded",
            )
        return None


def row_id_of(body: dict[str, Any]) -> str | None:
    """The ``rowId: …`` line of the first user message that has one."""
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            found = _ROW_ID.search(content)
            if found:
                shown = found.group(1).strip()
                # a rowId that is not a plain identifier is shown JSON-quoted
                return str(json.loads(shown)) if shown.startswith('"') else shown
    return None


def verdicts_responder(verdicts: dict[str, dict[str, Any]]) -> Responder:
    """Answer each request with the verdict JSON of its rowId; 404 for an unknown row."""

    def respond(body: dict[str, Any]) -> StubReply:
        row_id = row_id_of(body)
        if row_id is None or row_id not in verdicts:
            return StubReply(status=404, content=f"no scripted verdict for rowId {row_id!r}")
        return StubReply(content=json.dumps(verdicts[row_id], ensure_ascii=False))

    return respond


def scripted_responder(script: dict[str, list[StubReply]]) -> Responder:
    """Answer the n-th request for a rowId with ``script[rowId][n]`` (the last one repeats)."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> StubReply:
        row_id = row_id_of(body) or ""
        replies = script.get(row_id)
        if not replies:
            return StubReply(status=404, content=f"no script for rowId {row_id!r}")
        with lock:
            n = seen.get(row_id, 0)
            seen[row_id] = n + 1
        return replies[min(n, len(replies) - 1)]

    return respond


def load_verdicts(path: Path) -> dict[str, dict[str, Any]]:
    """Read a JSONL file of verdicts (each with ``rowId``)."""
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            verdict = json.loads(line)
            out[str(verdict["rowId"])] = verdict
    return out


class StubServer(LoopbackHTTP):
    """The server. Use as a context manager; ``base_url`` ends in ``/v1``.

    Args:
        responder: decides each answer from the request body.
        port: 0 picks a free port.
        latency_s: seconds every answer waits, on top of a reply's own ``delay_s`` (a
            provider's latency for throughput runs; each connection has its own thread, so
            concurrent requests wait in parallel).
        prompt_cache: report a system message seen before as cached tokens (OpenAI's
            automatic prompt caching; see the module docstring).
    """

    #: the request header that carries the key: never kept, only its SHA-256
    key_header = "authorization"

    def __init__(
        self,
        responder: Responder,
        port: int = 0,
        latency_s: float = 0.0,
        quirks: ServerQuirks | None = None,
        prompt_cache: bool = False,
    ) -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.quirks = quirks or ServerQuirks()
        self.prompt_cache = prompt_cache
        self.requests: list[dict[str, Any]] = []
        #: ``POST /tokenize`` requests (answered when ``quirks.tokenize``; else 404)
        self.tokenize_calls = 0
        self._lock = threading.Lock()
        self._cached: dict[str, float] = {}  # prefix -> when its first answer left
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body leave in two writes; with Nagle on, the body waits for the
            # client's delayed ACK of the headers (~40 ms), a latency no provider adds
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}}, {})
                    return
                if self.path.split("?", 1)[0].rstrip("/") == "/tokenize":  # beside /v1
                    stub.tokenize_calls += 1  # counted apart: ``requests`` are chat calls
                    if not stub.quirks.tokenize:
                        self._send(404, stub.error_payload("unknown path /tokenize", None), {})
                        return
                    count = len(str(body.get("content") or "")) // stub.quirks.chars_per_token
                    self._send(200, {"tokens": list(range(count))}, {})  # llama.cpp's answer
                    return
                headers = {
                    k.lower(): v for k, v in self.headers.items() if k.lower() != stub.key_header
                }
                auth = self.headers.get(stub.key_header)
                arrived = time.monotonic()
                with stub._lock:
                    stub.requests.append(
                        {
                            "path": self.path,
                            "body": body,
                            "raw": raw,
                            "headers": headers,
                            "authSha256": hashlib.sha256(auth.encode()).hexdigest()
                            if auth
                            else None,
                            "at": arrived,
                        }
                    )
                if not stub.serves(self.path.split("?", 1)[0].rstrip("/")):
                    self._send(404, stub.error_payload(f"unknown path {self.path}", None), {})
                    return
                view = stub.openai_view(body)
                reply = stub.quirks.refusal(view) or stub.responder(view)
                if reply.delay_s or stub.latency_s:
                    time.sleep(reply.delay_s + stub.latency_s)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                echo = f"(request to {self.path}; headers: {dict(self.headers.items())})"
                if reply.status != 200:
                    message = reply.content or "error"
                    if reply.echo_request:
                        message += f" {echo}"
                    self._send(
                        reply.status, stub.error_payload(message, reply.error_code), reply.headers
                    )
                    return
                if reply.echo_request and reply.content:
                    quoted = json.dumps(echo, ensure_ascii=False)[1:-1]
                    reply = replace(reply, content=reply.content.replace(ECHO, quoted))
                self._send(200, stub.answer(body, view, reply, arrived), reply.headers)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                text = json.dumps(payload, ensure_ascii=False)
                try:
                    data = text.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: sent as its escape, as JSON may
                    data = json.dumps(payload).encode("ascii")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self._listen(Handler, port)

    def serves(self, path: str) -> bool:
        """Whether ``path`` (query and trailing ``/`` removed) is this server's endpoint."""
        return path.endswith("/chat/completions")

    def openai_view(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the responder and the quirks read it: OpenAI chat-completion JSON."""
        return body

    def answer(
        self, body: dict[str, Any], view: dict[str, Any], reply: StubReply, arrived: float
    ) -> dict[str, Any]:
        """The 200 body for ``reply``: a ``chat.completion``, with cached tokens when
        ``prompt_cache`` is on and the system message was seen before."""
        out = completion(body, reply, self.quirks)
        if self.prompt_cache and reply.usage is None:
            system = "".join(
                str(m.get("content") or "")
                for m in body.get("messages") or []
                if m.get("role") == "system"
            )
            cached = len(system) // 4 if system and self.in_cache(system, arrived) else 0
            out["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        return out

    def error_payload(self, message: str, code: str | None) -> dict[str, Any]:
        """The body of a non-200 answer (OpenAI's error shape)."""
        return {"error": {"message": message, "type": "stub_error", "code": code}}

    def in_cache(self, prefix: str, arrived: float) -> bool:
        """Whether ``prefix`` was in the prompt cache when a request that ``arrived`` then
        (``time.monotonic()``) came: an answer with it had left before. Otherwise this answer
        writes it (the first one to leave counts), as providers cache a prefix once a request
        with it has been answered."""
        with self._lock:
            written = self._cached.setdefault(prefix, time.monotonic())
            return written <= arrived


def completion(
    body: dict[str, Any], reply: StubReply, quirks: ServerQuirks | None = None
) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` object for a scripted reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    if reply.refusal:
        message["refusal"] = reply.refusal
    usage = reply.usage or {
        "prompt_tokens": (quirks or ServerQuirks()).prompt_tokens(body),
        "completion_tokens": max(1, len(reply.content or "") // 4),
    }
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return {
        "id": f"chatcmpl-stub-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "stub-judge"),
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": usage,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--verdicts", type=Path, required=True, help="JSONL of verdicts, each with rowId"
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="wait this long before every answer"
    )
    parser.add_argument(
        "--drop-system", action="store_true", help="behave like a template that drops system"
    )
    parser.add_argument(
        "--reject-json-schema", action="store_true", help="answer json_schema with HTTP 500"
    )
    parser.add_argument("--context-limit", type=int, help="answer longer prompts with HTTP 400")
    args = parser.parse_args()
    server = StubServer(
        verdicts_responder(load_verdicts(args.verdicts)),
        port=args.port,
        latency_s=args.latency_ms / 1000,
        quirks=ServerQuirks(args.drop_system, args.reject_json_schema, args.context_limit),
    )
    print(f"stub judge on {server.base_url} (Ctrl-C stops)", flush=True)
    server.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
