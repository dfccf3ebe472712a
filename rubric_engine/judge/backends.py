"""Where a judge call's answer comes from: the provider (live, record) or a cassette (replay).

Each backend answers one chat-completion request at a time for an :class:`InstructorJudge`.
Replay builds the same response object a live call returns and hands it to the same
instructor parsing and validation, so replay and live differ only in where bytes come from.

litellm is imported only by the live backends, and only when first used.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from rubric_engine.cassette import (
    CassetteEntry,
    CassetteIndex,
    CassetteWriter,
    key_parts,
    request_key,
    sanitize_response,
)
from rubric_engine.judge.limiter import AdaptiveLimit
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.judge.retry import RetryPolicy, status_of
from rubric_engine.judge.secrets import redact


class CassetteMiss(Exception):
    """Replay found no response for a request. Carries the key and what to do."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass
class CallContext:
    """State of one row's calls, shared by instructor's re-asks for that row."""

    request: JudgeRequest
    attempts: list[Attempt] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    reasks: list[str] = field(default_factory=list)
    key: str | None = None
    parts: dict[str, str] | None = None
    #: set after a truncated answer: the re-ask's larger ``max_tokens`` (not part of the key)
    max_tokens: int | None = None

    def keyed(self, kwargs: dict[str, Any]) -> str:
        """The canonical key of the row's *first* request; re-asks reuse it."""
        if self.key is None:
            self.parts = key_parts(kwargs, self.request.rubric_hash, self.request.prompt_hash)
            self.key = request_key(self.parts)
        return self.key


def _usage(response: dict[str, Any]) -> tuple[int, int]:
    usage = response.get("usage") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


def chat_completion(raw: dict[str, Any]) -> Any:
    """A wire-format dict as the object a live OpenAI-compatible call returns."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(raw)


class Backend(Protocol):
    async def complete(self, kwargs: dict[str, Any], call: CallContext) -> Any: ...

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None: ...


class ReplayBackend:
    """Answers from cassettes; never touches the network (SPEC §10)."""

    def __init__(self, index: CassetteIndex) -> None:
        self.index = index

    async def complete(self, kwargs: dict[str, Any], call: CallContext) -> Any:
        key = call.keyed(kwargs)
        entry = self.index.get(key)
        if entry is None:
            assert call.parts is not None
            raise CassetteMiss(
                key,
                f"cassette miss for row {call.request.row_id!r}, key {key}: "
                f"{self.index.explain_miss(call.request.row_id, call.parts)}",
            )
        served = len(call.responses)
        if served >= len(entry.attempts):
            raise CassetteMiss(
                key,
                f"cassette {entry.where} holds {len(entry.attempts)} "
                f"response(s) for row {call.request.row_id!r} but the judge asked "
                f"for response {served + 1} (a re-ask)",
            )
        started = time.perf_counter()
        raw = entry.attempts[served]["response"]
        response = chat_completion(raw)
        prompt, completion = _usage(raw)
        call.responses.append(raw)
        call.attempts.append(
            Attempt(
                response=raw,
                latency_ms=(time.perf_counter() - started) * 1e3,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        )
        return response

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None:
        return None


@dataclass
class LiveSettings:
    """Transport settings of a live call; none of them enter cassettes or the store.

    Attributes:
        api_base: e.g. ``http://127.0.0.1:8000/v1`` for an OpenAI-compatible server.
        api_key_env: the environment variable that holds the key; ``None`` lets litellm read
            the provider's usual one.
        timeout_s: per-request timeout in seconds.
    """

    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def transport_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timeout": self.timeout_s, "num_retries": 0, "max_retries": 0}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if self.api_base:
            out["api_base"] = self.api_base
            if key is None and not os.environ.get("OPENAI_API_KEY"):
                key = "no-key"  # OpenAI-compatible local servers often need none
        if key is not None:
            out["api_key"] = key
        return out


def import_litellm() -> Any:
    """Import litellm on first need, with its offline price map (no download at import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiveBackend:
    """Calls the provider through litellm, retrying transport errors by :class:`RetryPolicy`.

    Each attempt holds a slot of ``limiter`` (adaptive concurrency) only while it is on the
    wire; a 429 shrinks the limit, a success grows it back.
    """

    def __init__(self, settings: LiveSettings, limiter: AdaptiveLimit | None = None) -> None:
        self.settings = settings
        self.limiter = limiter or AdaptiveLimit(64)
        self._litellm: Any = None
        self._unpriced: set[str] = set()

    async def complete(self, kwargs: dict[str, Any], call: CallContext) -> Any:
        call.keyed(kwargs)
        if self._litellm is None:
            self._litellm = import_litellm()
        transport = self.settings.transport_kwargs()
        async for attempt in self.settings.retry.retrying():
            with attempt:
                started = time.perf_counter()
                async with self.limiter.slot() as ticket:
                    try:
                        response = await self._litellm.acompletion(**kwargs, **transport)
                    except Exception as exc:  # every transport failure is logged, then judged
                        if status_of(exc) == 429:
                            self.limiter.on_rate_limited(ticket)
                        call.attempts.append(
                            Attempt(
                                response=None,
                                error=redact(describe_error(exc), transport.get("api_key")),
                                latency_ms=(time.perf_counter() - started) * 1e3,
                            )
                        )
                        raise
                await self.limiter.on_success()
                latency = (time.perf_counter() - started) * 1e3
                raw = sanitize_response(response.model_dump(mode="json"))
                prompt, completion = _usage(raw)
                call.responses.append(raw)
                call.attempts.append(
                    Attempt(
                        response=raw,
                        latency_ms=latency,
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                        cost_usd=self._cost(response),
                    )
                )
                return response
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _cost(self, response: Any) -> float | None:
        """The call's cost in USD as litellm priced it, or ``None`` for an unpriced model.

        litellm prices every response as it returns it (``_hidden_params.response_cost``);
        pricing it again cost more CPU than the rest of the call for a model litellm does not
        know (it searches every pricing rule before giving up), so that is done only when
        litellm left no price, and once per model that turns out to have none.
        """
        hidden = getattr(response, "_hidden_params", None) or {}
        if hidden.get("response_cost") is not None:
            return float(hidden["response_cost"])
        model = str(getattr(response, "model", ""))
        if model in self._unpriced:
            return None
        try:
            return float(self._litellm.completion_cost(completion_response=response))
        except Exception:  # litellm raises many kinds for a model without a known price
            self._unpriced.add(model)
            return None

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None:
        return None


class RecordBackend(LiveBackend):
    """Live calls whose responses are appended to a cassette as ``recorded``."""

    def __init__(
        self,
        settings: LiveSettings,
        writer: CassetteWriter,
        provider: str,
        limiter: AdaptiveLimit | None = None,
    ) -> None:
        super().__init__(settings, limiter)
        self.writer = writer
        self.provider = provider

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None:
        if not call.responses or call.key is None or call.parts is None:
            return  # transport failed throughout: nothing worth replaying
        if outcome.error is not None and outcome.error.kind == "TRANSPORT":
            return
        model = str(call.responses[-1].get("model") or call.parts["model"])
        self.writer.write(
            CassetteEntry(
                key=call.key,
                row_id=call.request.row_id,
                key_parts=call.parts,
                provenance={
                    "kind": "recorded",
                    "provider": self.provider,
                    "model": model,
                    "recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                },
                attempts=[
                    {"response": r, "latencyMs": round(a.latency_ms, 1)}
                    for r, a in zip(
                        call.responses,
                        [a for a in call.attempts if a.response is not None],
                        strict=True,
                    )
                ],
            )
        )


def describe_error(exc: BaseException) -> str:
    """One line: the error type, the HTTP status a server sent (not a client-side stand-in
    for a refused connection or a timeout), and the first line of the message."""
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if name in _CLIENT_SIDE:
        status = None
    text = str(exc).splitlines()[0] if str(exc) else ""
    return name + (f" (HTTP {status})" if status else "") + (f": {text[:300]}" if text else "")


_CLIENT_SIDE = {"APIConnectionError", "Timeout", "APITimeoutError"}
