"""An Anthropic-Messages-compatible judge on loopback that simulates prompt caching.

The same server as :mod:`rubric_engine.testing.openai_stub` (its HTTP plumbing, request log,
responders and verdict files), speaking ``POST /v1/messages``: litellm's ``anthropic/``
provider with ``--api-base http://127.0.0.1:PORT`` reaches it, so a test sees the request
Anthropic would get (the ``system`` blocks and their ``cache_control`` markers) and the usage
Anthropic reports, read back through litellm.

Caching as Anthropic does it, in small: the prefix up to the last ``system`` block that
carries ``cache_control`` is cached once a request bringing it has been answered: a request
that arrives before then reports the prefix's tokens as ``cache_creation_input_tokens``, one
that arrives after as ``cache_read_input_tokens``; ``input_tokens`` is the rest. Tokens are
characters / 4, as the OpenAI stub counts them. A request without a marker caches nothing.

    rubric-eval score rows.jsonl -r health_cs --mode live --model anthropic/claude-haiku-4-5 \
        --api-base http://127.0.0.1:PORT --api-key-env STUB_KEY
"""

from __future__ import annotations

import time
from typing import Any

from rubric_engine.testing.openai_stub import StubReply, StubServer

#: OpenAI finish reasons as Anthropic's stop reasons
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _text(content: Any) -> str:
    """A message's or the system's text: a string, or its text blocks joined."""
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return str(content or "")


def cached_prefix(body: dict[str, Any]) -> str:
    """The system text up to and including the last block marked ``cache_control`` ("" when
    no block is marked)."""
    blocks = body.get("system")
    if not isinstance(blocks, list):
        return ""
    marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    return _text(blocks[: marked[-1] + 1]) if marked else ""


class AnthropicStubServer(StubServer):
    """:class:`~rubric_engine.testing.openai_stub.StubServer` on Anthropic's Messages API.

    ``base_url`` has no ``/v1`` (litellm appends ``/v1/messages``); the key arrives as
    ``x-api-key`` and is kept only as its SHA-256. Responders see the request as OpenAI
    chat messages (the system text first), so the OpenAI stub's verdict responders answer
    here unchanged.
    """

    key_header = "x-api-key"

    @property
    def base_url(self) -> str:
        return super().base_url.removesuffix("/v1")

    def serves(self, path: str) -> bool:
        return path.endswith("/v1/messages")

    def openai_view(self, body: dict[str, Any]) -> dict[str, Any]:
        system = _text(body.get("system"))
        messages = [{"role": m.get("role"), "content": _text(m.get("content"))}
                    for m in body.get("messages") or []]  # fmt: skip
        head = [{"role": "system", "content": system}] if system else []
        return {**body, "messages": head + messages}

    def answer(
        self, body: dict[str, Any], view: dict[str, Any], reply: StubReply, arrived: float
    ) -> dict[str, Any]:
        total = self.quirks.prompt_tokens(view)
        prefix = cached_prefix(body)
        cached = min(total, len(prefix) // 4) if prefix else 0
        read = cached if cached and self.in_cache(prefix, arrived) else 0
        usage = reply.usage or {
            "input_tokens": total - cached,
            "output_tokens": max(1, len(reply.content or "") // 4),
            "cache_creation_input_tokens": cached - read,
            "cache_read_input_tokens": read,
        }
        return {
            "id": f"msg_stub_{int(time.time() * 1000)}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or "stub-judge"),
            "content": [{"type": "text", "text": reply.content or ""}],
            "stop_reason": _STOP_REASONS.get(reply.finish_reason, reply.finish_reason),
            "stop_sequence": None,
            "usage": usage,
        }

    def error_payload(self, message: str, code: str | None) -> dict[str, Any]:
        return {"type": "error", "error": {"type": code or "invalid_request_error",
                                           "message": message}}  # fmt: skip
