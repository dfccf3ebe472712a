"""The judge's own prepare → parse → re-ask loop behaves exactly like instructor's ``create``.

:class:`InstructorJudge` drives instructor's JSON-mode handler itself and prepares the system
message once per task (see its module docstring). Guarded here: for the same scripted replies,
the requests the backend sees (every attempt, re-asks included), the re-ask reasons, the final
verdict and the kind of failure are the ones instructor's ``create`` gives — the reference
below is the engine's previous judge, ``instructor.from_litellm(fn, mode=JSON).create``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from rubric_engine.cassette import _digest, key_parts, messages_digest, request_key
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.judge.backends import CallContext, chat_completion
from rubric_engine.judge.instructor_judge import (
    MAX_TOKENS_CAP,
    TRUNCATION_GROWTH,
    InstructorJudge,
    JudgeRefusal,
    _first_line,
    _raise_if_refused,
    _verdict_from_tool_call,
)
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.pipeline import RequestBuilder
from rubric_engine.prompt import load_prompt
from rubric_engine.verdict import ROW_CONTEXT


class ProviderDown(Exception):
    status_code = 503


def reply(
    content: str | None,
    finish_reason: str = "stop",
    refusal: str | None = None,
    tool_arguments: str | None = None,
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal:
        message["refusal"] = refusal
    if tool_arguments:
        message["tool_calls"] = [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "verdict", "arguments": tool_arguments},
            }
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-judge",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def verdict(**fields: Any) -> str:
    body = {
        "rowId": "r-1",
        "intentKey": "REFUND",
        "score": 3,
        "redFlagTypes": [],
        "scoreExplanation": "scripted",
        "unmetRequirementIds": ["REFUND_VERIFY"],
        "partialRequirementIds": [],
        "questionsCheck": "NOT_PRESENT",
        "questionsIssues": [],
    }
    body.update(fields)
    return json.dumps(body)


SCRIPTS: dict[str, list[Any]] = {
    "valid": [reply(verdict())],
    "cleaned values": [reply(verdict(score="４", unmetRequirementIds=[" refund_verify\u200b"]))],
    "unknown intent, then valid": [reply(verdict(intentKey="REFUNDS")), reply(verdict())],
    "fenced after prose": [reply("Here it is:\n```json\n" + verdict() + "\n```")],
    "malformed JSON, re-asked out": [reply('{"rowId": "r-1", "score": 3')] * 3,
    "off-scale score, re-asked out": [reply(verdict(score=9))] * 3,
    "unknown ID then malformed then valid": [
        reply(verdict(unmetRequirementIds=["NOPE"])),
        reply("not json at all"),
        reply(verdict(score=2)),
    ],
    "truncated until the rounds run out": [reply(verdict()[:40], finish_reason="length")],
    "truncated, then valid with more room": [
        reply(verdict()[:40], finish_reason="length"),
        reply(verdict(score=4)),
    ],
    "truncated, then invalid, then valid": [
        reply(verdict()[:40], finish_reason="length"),
        reply(verdict(intentKey="nope")),
        reply(verdict()),
    ],
    "verdict as a tool call": [reply("", tool_arguments=verdict(score=2))],
    "refused": [reply(None, refusal="I can't help with that")],
    "content filter": [reply("", finish_reason="content_filter")],
    "transport fails": [ProviderDown("upstream unavailable")],
    "case-level ID": [reply(verdict(unmetRequirementIds=["CASE_EXPECTED_X"]))],
}


@dataclass
class ScriptBackend:
    """Serves the script's replies in order and records every request it is sent."""

    script: list[Any]
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def answer(self, kwargs: dict[str, Any]) -> Any:
        self.seen.append(copy.deepcopy(kwargs))
        item = self.script[min(len(self.seen), len(self.script)) - 1]
        if isinstance(item, Exception):
            raise item
        return chat_completion(item)

    async def complete(self, kwargs: dict[str, Any], call: CallContext) -> Any:
        call.keyed(kwargs)
        response = await self.answer(kwargs)
        call.responses.append(response.model_dump())
        call.attempts.append(Attempt(response=call.responses[-1]))
        return response

    def finish(self, call: CallContext, outcome: JudgeOutcome) -> None:
        return None


def request(mini_rubric: Any, case_ids: tuple[str, ...] = ()) -> JudgeRequest:
    row = DialogueRow.model_validate(
        {
            "rowId": "r-1",
            "messages": [
                {"role": "user", "content": "I want my money back for order 17 {{ not jinja }}"},
                {"role": "assistant", "content": "Refund approved, 100% guaranteed!"},
            ],
        }
    )
    prepared = RequestBuilder(mini_rubric, load_prompt()).prepare(0, row).request
    if case_ids:
        prepared = JudgeRequest(
            row_id=prepared.row_id,
            messages=prepared.messages,
            case_requirement_ids=case_ids,
            rubric_hash=prepared.rubric_hash,
            prompt_hash=prepared.prompt_hash,
        )
    return prepared


async def reference(judge: InstructorJudge, req: JudgeRequest, backend: ScriptBackend) -> dict:
    """What the engine's previous judge did with the same request and replies: instructor's
    own ``create`` around the backend, started again with more room after a truncation."""
    import instructor
    from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException

    reasks: list[str] = []
    room_box: list[int | None] = [None]

    async def complete(*args: Any, **kwargs: Any) -> Any:
        if room_box[0] is not None:
            kwargs["max_tokens"] = room_box[0]
        response = await backend.answer(kwargs)
        _raise_if_refused(response)
        _verdict_from_tool_call(response)
        return response

    client: Any = instructor.from_litellm(complete, mode=instructor.Mode.JSON)
    client.on("parse:error", lambda error, *a, **k: reasks.append(_first_line(error)))
    token = ROW_CONTEXT.set(
        {"row_id": req.row_id, "case_requirement_ids": list(req.case_requirement_ids)}
    )
    room = int(judge.params["max_tokens"])
    outcome: dict[str, Any] = {}
    try:
        for truncations in range(judge.max_reasks + 1):
            try:
                parsed = await client.create(
                    response_model=judge.verdict_model,
                    messages=[dict(m) for m in req.messages],
                    model=judge.model,
                    max_retries=judge.max_reasks,
                    **judge.params,
                )
                outcome = {"verdict": parsed.model_dump(), "kind": None}
                break
            except IncompleteOutputException:
                cut_at = room
                room = min(MAX_TOKENS_CAP, room * TRUNCATION_GROWTH)
                if truncations == judge.max_reasks or cut_at >= MAX_TOKENS_CAP:
                    outcome = {"verdict": None, "kind": "TRUNCATED"}
                    break
                reasks.append(f"output cut off at max_tokens={cut_at}; asked again with {room}")
                room_box[0] = room
    except InstructorRetryException as exc:
        cause = exc.__cause__
        kind = "TRANSPORT"
        if isinstance(cause, JudgeRefusal):
            kind = "REFUSED"
        elif type(cause).__name__ in ("ValidationError", "JSONDecodeError"):
            kind = "INVALID_OUTPUT"
            reasks = reasks[:-1]
        outcome = {"verdict": None, "kind": kind}
    finally:
        ROW_CONTEXT.reset(token)
    return {**outcome, "reasks": reasks}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_loop_matches_instructor_create(name: str, mini_rubric: Any) -> None:
    judge = InstructorJudge(ScriptBackend([]), mini_rubric, "openai/stub-judge", max_reasks=2)
    case_ids = ("CASE_EXPECTED_X",) if name == "case-level ID" else ()
    req = request(mini_rubric, case_ids)

    ours = ScriptBackend(SCRIPTS[name])
    judge.backend = ours
    outcome = asyncio.run(judge.judge(req))
    theirs = ScriptBackend(SCRIPTS[name])
    expected = asyncio.run(reference(judge, req, theirs))

    assert ours.seen == theirs.seen  # every attempt's request, re-asks included
    assert len(ours.seen) >= 1
    got = {
        "verdict": outcome.verdict.model_dump() if outcome.verdict else None,
        "kind": str(outcome.error.kind) if outcome.error else None,
        "reasks": outcome.reasks,
    }
    assert got == expected


def test_prepared_system_message_is_reused_across_rows(mini_rubric: Any) -> None:
    """The second row's request equals instructor's full preparation of it (not the first's)."""
    judge = InstructorJudge(ScriptBackend([]), mini_rubric, "openai/stub-judge")
    first = request(mini_rubric)
    second = JudgeRequest(
        row_id="r-2",
        messages=(first.messages[0], {"role": "user", "content": "rowId: r-2\nanother dialogue"}),
        case_requirement_ids=(),
        rubric_hash=first.rubric_hash,
        prompt_hash=first.prompt_hash,
    )
    for req in (first, second, first):
        fast = judge.request_kwargs(req)
        assert fast == judge.instructor_kwargs([dict(m) for m in req.messages])
    assert len(judge._prepared) == 1


@pytest.mark.parametrize(
    "messages",
    [
        [
            {"role": "system", "content": '规则 "quoted" \\ back\nslash'},
            {"role": "user", "content": "x"},
        ],
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
        ],
        [{"role": "system", "content": "s", "name": "extra key"}, {"role": "user", "content": "u"}],
        [{"role": "system", "content": "only one"}],
        [],
    ],
)
def test_messages_digest_equals_full_digest(messages: list[dict[str, Any]]) -> None:
    """The cached-prefix hash is the plain hash of the whole list, byte for byte."""
    assert messages_digest(messages) == _digest(messages)
    assert messages_digest(messages) == messages_digest(copy.deepcopy(messages))


def test_cassette_key_of_a_request_is_stable(mini_rubric: Any) -> None:
    judge = InstructorJudge(ScriptBackend([]), mini_rubric, "openai/stub-judge")
    req = request(mini_rubric)
    kwargs = judge.request_kwargs(req)
    parts = key_parts(kwargs, req.rubric_hash, req.prompt_hash)
    assert parts["messagesHash"] == _digest(kwargs["messages"])
    assert request_key(parts) == request_key(
        key_parts(copy.deepcopy(kwargs), req.rubric_hash, req.prompt_hash)
    )
