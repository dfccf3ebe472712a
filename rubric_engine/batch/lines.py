"""Batch input lines and output lines in OpenAI's batch file format (docs/batch.md).

An input line is the very chat request the live judge sends (instructor's JSON-mode kwargs:
messages with the schema instructions, sampling parameters, ``response_format``), wrapped as::

    {"custom_id": "t5d41402a.r000012.a0.3f9c2e1b7a", "method": "POST",
     "url": "/v1/chat/completions",
     "body": {"model": "gpt-4o-mini", "messages": [...], "temperature": 0.0, ...}}

The body's model is the provider's own name (litellm's ``openai/`` prefix dropped), since the
file goes to the provider, vLLM's batch runner or a user's own engine, not through litellm.

An output line (OpenAI's batch output and error files, vLLM's ``run_batch`` output) is::

    {"id": ..., "custom_id": ..., "response": {"status_code": 200, "body": {chat.completion}},
     "error": null}

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rubric_engine.batch.settings import MAX_BYTES, MAX_REQUESTS
from rubric_engine.errors import InputError
from rubric_engine.judge.cassettes.cassette import sanitize_response

ENDPOINT = "/v1/chat/completions"
#: ``t<task>.`` is absent from the ids of tasks exported before ids carried their task;
#: ``s<sample>.`` is in the ids of a sampled row's samples from 2 on (docs/stability.md)
_CUSTOM_ID = re.compile(r"^(?:t([0-9a-f]{8})\.)?r(\d+)\.(?:s(\d+)\.)?a(\d+)\.([0-9a-f]{10})$")


def _short_hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def custom_id(seq: int, attempt: int, row_id: str, task_id: str, sample: int = 1) -> str:
    """The deterministic ``custom_id`` of a row's ``attempt``-th request (0 = first ask).

    ``seq`` is the row's place in the input (from 0); the rowId's hash guards against answers
    from another file, the task id's hash against another task's answers (two tasks of one
    input ask the same rows). The same task, row, sample and attempt always give the same id,
    so a resumed run can tell requests it already submitted from new ones. ``sample`` (from
    1, ``score --samples K``) is in the id from 2 on (``.s2.``): sample 1's id is a single
    ask's, so a run of one sample per row writes the files it always wrote.
    """
    part = f"s{sample}." if sample > 1 else ""
    return f"t{task_hash(task_id)}.r{seq:06d}.{part}a{attempt}.{_short_hash(row_id, 10)}"


def task_hash(task_id: str) -> str:
    """The task part of the task's ``custom_id`` values."""
    return _short_hash(task_id, 8)


@dataclass(frozen=True)
class CustomId:
    #: ``None`` in an id written before ids carried their task
    task_hash: str | None
    seq: int
    attempt: int
    row_hash: str
    #: the row's sample the request asks (1 for a single ask)
    sample: int = 1

    def matches(self, row_id: str) -> bool:
        return _short_hash(row_id, 10) == self.row_hash


def parse_custom_id(text: str) -> CustomId | None:
    """The parts of a :func:`custom_id`; ``None`` for an id this engine did not write."""
    found = _CUSTOM_ID.match(text)
    if found is None:
        return None
    sample = int(found.group(3)) if found.group(3) else 1
    return CustomId(
        found.group(1), int(found.group(2)), int(found.group(4)), found.group(5), sample
    )


def provider_model(model: str) -> str:
    """``openai/gpt-4o-mini`` → ``gpt-4o-mini``; ``hosted_vllm/org/m`` → ``org/m``."""
    return model.split("/", 1)[1] if "/" in model else model


def request_line(cid: str, kwargs: dict[str, Any]) -> bytes:
    """One input line (UTF-8, newline-terminated) for the judge's request ``kwargs``."""
    body = {k: v for k, v in kwargs.items() if v is not None}
    body["model"] = provider_model(str(kwargs["model"]))
    line = {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def split_lines(
    lines: Iterable[bytes], max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES
) -> Iterator[list[bytes]]:
    """Group lines, in order, into files of at most ``max_requests`` lines and ``max_bytes``.

    Raises:
        InputError: one line alone is larger than ``max_bytes`` (no provider takes it).
    """
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise InputError(
                f"one batch request is {len(line):,} bytes, over the {max_bytes:,}-byte file "
                "limit; raise --batch-max-bytes or shorten the row"
            )
        if chunk and (len(chunk) >= max_requests or size + len(line) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


@dataclass(frozen=True)
class LineResult:
    """One output or error line, read.

    Attributes:
        custom_id: the request it answers.
        response: the chat completion (wire fields only) when the request got HTTP 200.
        error: why it got none (HTTP status and message, ``batch_expired`` …) otherwise.
    """

    custom_id: str
    response: dict[str, Any] | None
    error: str | None


def read_output_line(obj: Any, where: str) -> LineResult:
    """Read one line of a batch output or error file.

    Raises:
        InputError: the line is not a batch output object (names ``where``).
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        raise InputError(
            f"{where}: not a batch output line (needs custom_id and response or error, as in "
            "OpenAI's batch output format)"
        )
    cid = obj["custom_id"]
    response = obj.get("response")
    error = obj.get("error")
    if isinstance(response, dict) and response.get("status_code") == 200:
        body = response.get("body")
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise InputError(f"{where}: response.body of {cid} is not a chat completion")
        return LineResult(cid, sanitize_response(body), None)
    if isinstance(error, dict):
        return LineResult(cid, None, f"{error.get('code') or 'error'}: {error.get('message')}")
    if isinstance(response, dict):
        body = response.get("body") or {}
        message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
        return LineResult(cid, None, f"HTTP {response.get('status_code')}: {message}")
    raise InputError(f"{where}: {cid} has neither a response nor an error")
