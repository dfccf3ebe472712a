"""One model call outside the row pipeline — ask, read, re-ask — for commands that ask a
model something other than a verdict: ``rubric draft`` (a pack from policy prose) and
``actions --summarize`` (a candidate rule per cluster of explanations).

The call goes through the judge's own backends (:mod:`rubric_engine.judge.backends`):
``replay`` from cassettes keyed like every other call (model, messages, parameters, schema,
and the hashes of the subject and the prompt), ``record`` (live, and the answers appended to
a cassette as ``recorded``) and ``live``. Each answer is read by the caller's ``read``, which
returns the value or its problems; problems are sent back as a re-ask, at most
``max_reasks`` times, and every answer of the call is one cassette entry, re-asks included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from rubric_engine.errors import CassetteMissError, ConfigurationError, JudgeCallError
from rubric_engine.judge.backends import (
    Backend,
    CallKey,
    LiveBackend,
    LiveSettings,
    RecordBackend,
    ReplayBackend,
)
from rubric_engine.judge.cassettes.cassette import CassetteWriter
from rubric_engine.judge.cassettes.index import CassetteIndex
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.judge.server_checks import reply_text
from rubric_engine.results.model import JudgeErrorKind

T = TypeVar("T")
Mode = Literal["replay", "record", "live"]
MODES: tuple[str, ...] = ("replay", "record", "live")


@dataclass
class CallSettings:
    """Where the answer comes from: ``mode``, the cassette folder (``replay`` reads every
    cassette under it; ``record`` appends to ``record_file`` inside it) and the live
    transport."""

    mode: str = "replay"
    cassettes: Path = Path("cassettes")
    record_file: str = "calls.jsonl"
    live: LiveSettings = field(default_factory=LiveSettings)


def backend_for(settings: CallSettings, model: str) -> Backend:
    """The backend of ``settings``.

    Raises:
        ConfigurationError: an unknown mode, or a replay's cassette folder is missing.
    """
    if settings.mode not in MODES:
        raise ConfigurationError(
            f"--mode {settings.mode!r} is not valid; use replay, record or live"
        )
    if settings.mode == "replay":
        if not settings.cassettes.is_dir():
            raise ConfigurationError(
                f"cassette folder {settings.cassettes} not found; pass --cassettes DIR, or "
                "--mode live with a model"
            )
        return ReplayBackend(CassetteIndex.load(settings.cassettes))
    if settings.mode == "record":
        writer = CassetteWriter(settings.cassettes / settings.record_file)
        return RecordBackend(settings.live, writer, provider=model.split("/")[0])
    return LiveBackend(settings.live)


@dataclass(frozen=True)
class Answered(Generic[T]):
    """A call's value, every answer it took, and where the accepted one came from."""

    value: T
    attempts: tuple[Attempt, ...]
    provenance: dict[str, Any] | None  # the cassette entry's, on a replay
    reasks: tuple[str, ...]


def ask(
    backend: Backend,
    request: JudgeRequest,
    kwargs: dict[str, Any],
    read: Callable[[str], tuple[T | None, list[str]]],
    max_reasks: int = 2,
) -> Answered[T]:
    """Ask ``kwargs`` (the first request; its key is the call's key) until ``read`` accepts
    an answer.

    Raises:
        CassetteMissError: a replay has no answer (or no further answer for a re-ask).
        JudgeCallError: the call failed in transport, or no answer passed ``read`` after
            ``max_reasks`` re-asks; the message lists the last answer's problems.
    """
    return asyncio.run(_ask(backend, request, kwargs, read, max_reasks))


async def _ask(
    backend: Backend,
    request: JudgeRequest,
    kwargs: dict[str, Any],
    read: Callable[[str], tuple[T | None, list[str]]],
    max_reasks: int,
) -> Answered[T]:
    key = CallKey.of(kwargs, request)
    attempts: list[Attempt] = []
    reasks: list[str] = []
    sent = kwargs
    try:
        while True:
            answer = await backend.complete(sent, request, key, served=len(reasks))
            attempts.extend(answer.attempts)
            if answer.failure is not None:
                kind, message = answer.failure
                if kind is JudgeErrorKind.CASSETTE_MISS:
                    raise CassetteMissError(f"{message}; record it with --mode record")
                raise JudgeCallError(f"the call to {kwargs.get('model')} failed: {message}")
            assert answer.response is not None
            text = reply_text(answer.response)
            value, problems = read(text)
            if value is not None and not problems:
                provenance = None
                if isinstance(backend, ReplayBackend):
                    provenance = backend.index.provenance(key.key)
                return Answered(value, tuple(attempts), provenance, tuple(reasks))
            if len(reasks) >= max_reasks:
                listed = "\n  - ".join(problems)
                raise JudgeCallError(
                    f"{request.row_id}: no valid answer after {len(reasks)} re-ask(s); the "
                    f"last answer's problems:\n  - {listed}"
                )
            reasks.append("\n".join(problems))
            sent = {
                **sent,
                "messages": [
                    *sent["messages"],
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": reask_text(problems)},
                ],
            }
    finally:
        outcome = JudgeOutcome(verdict=None, error=None, attempts=attempts, cassette_key=key.key)
        backend.finish(request, key, outcome)


def reask_text(problems: list[str]) -> str:
    """What a re-ask says: every problem, then what to send."""
    listed = "\n".join(f"- {p}" for p in problems)
    return (
        f"Your answer has these problems:\n{listed}\n"
        "Answer again with the whole corrected JSON object and nothing else."
    )
