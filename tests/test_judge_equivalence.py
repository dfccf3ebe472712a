"""The judge's requests are instructor's, and each scripted reply gets the stated outcome.

:class:`InstructorJudge` prepares requests and re-asks through instructor's JSON-mode handlers
(``judge/instructor_adapter.py``, public API) and prepares the system message once per task.
Guarded here: the first request of a row is byte for byte what instructor's own public
``create`` sends (so cassette keys are unchanged), every later request is a round with more
room or instructor's re-ask shape, and each script ends in the verdict or error stated.

(The engine's earlier judge let instructor parse, through an overridden ``model_validate_json``
and a context variable; that reference is gone with them. Where the outcome differs from it
on purpose, tests/test_judge_reply.py and tests/test_hostile_judge.py name the case.)
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.judge.backends import Answer, CallKey, chat_completion
from rubric_engine.judge.cassettes.cassette import _digest, key_parts, messages_digest, request_key
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.prompt import load_prompt
from rubric_engine.judge.protocol import Attempt, JudgeOutcome, JudgeRequest
from rubric_engine.results.model import JudgeErrorKind, WarningCode


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


#: per script: (judge score or None, error kind or None, number of re-asks kept on the row)
EXPECTED: dict[str, tuple[int | None, str | None, int]] = {
    "valid": (3, None, 0),
    "cleaned values": (4, None, 0),
    "unknown intent, then valid": (3, None, 1),
    "fenced after prose": (3, None, 0),
    "malformed JSON, re-asked out": (None, "INVALID_OUTPUT", 2),
    "off-scale score, re-asked out": (None, "INVALID_OUTPUT", 2),
    "unknown ID then malformed then valid": (2, None, 2),
    "truncated until the rounds run out": (None, "TRUNCATED", 2),
    "truncated, then valid with more room": (4, None, 1),
    "truncated, then invalid, then valid": (3, None, 2),
    "verdict as a tool call": (2, None, 0),
    "refused": (None, "REFUSED", 0),
    "content filter": (None, "REFUSED", 0),
    "transport fails": (None, "TRANSPORT", 0),
    "case-level ID": (3, None, 0),
}


@dataclass
class ScriptBackend:
    """Serves the script's replies in order and records every request it is sent."""

    script: list[Any]
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def complete(
        self, kwargs: dict[str, Any], request: JudgeRequest, key: CallKey, served: int
    ) -> Answer:
        self.seen.append(copy.deepcopy(kwargs))
        item = self.script[min(len(self.seen), len(self.script)) - 1]
        if isinstance(item, Exception):
            failed = Attempt(response=None, error=f"{type(item).__name__}: {item}")
            return Answer((failed,), (JudgeErrorKind.TRANSPORT, f"provider call failed: {item}"))
        return Answer((Attempt(response=copy.deepcopy(item)),))

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
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


def instructor_create_request(judge: InstructorJudge, req: JudgeRequest) -> dict[str, Any]:
    """The request instructor's own public ``create`` (``from_litellm``, JSON mode) sends."""
    import instructor

    sent: list[dict[str, Any]] = []

    async def complete(*args: Any, **kwargs: Any) -> Any:
        sent.append(copy.deepcopy(kwargs))
        return chat_completion(reply(verdict()))

    client: Any = instructor.from_litellm(complete, mode=instructor.Mode.JSON)
    asyncio.run(
        client.create(
            response_model=judge.verdict_model,
            messages=[dict(m) for m in req.messages],
            model=judge.model,
            max_retries=0,
            **judge.params,
        )
    )
    (first,) = sent
    return first


REASK = "Correct your JSON ONLY RESPONSE, based on the following errors:\n"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_requests_are_instructors_and_outcomes_are_as_stated(name: str, mini_rubric: Any) -> None:
    """Every request the backend sees is instructor's: the first is what ``create`` sends, a
    round after a truncation is the first with more ``max_tokens``, a re-ask is the request
    before it plus the judge's reply and instructor's correction message with our reason."""
    judge = InstructorJudge(ScriptBackend([]), mini_rubric, "openai/stub-judge", max_reasks=2)
    case_ids = ("CASE_EXPECTED_X",) if name == "case-level ID" else ()
    req = request(mini_rubric, case_ids)
    ours = ScriptBackend(SCRIPTS[name])
    judge.backend = ours
    outcome = asyncio.run(judge.judge(req))

    first = instructor_create_request(judge, req)
    assert ours.seen[0] == first
    replies = [r for r in SCRIPTS[name] if isinstance(r, dict)]
    for n, (before, sent) in enumerate(itertools.pairwise(ours.seen)):
        if sent["messages"] == first["messages"]:  # a new round with more room
            assert sent == {**first, "max_tokens": sent["max_tokens"]}
            assert sent["max_tokens"] > before["max_tokens"]
            continue
        answer = replies[min(n, len(replies) - 1)]["choices"][0]["message"]
        assert sent["messages"][:-2] == before["messages"]
        assert sent["messages"][-2]["content"] == (answer["content"] or "")
        assert sent["messages"][-1]["content"].startswith(REASK)
        final = outcome.error.message.split(": ", 1)[1] if outcome.error else ""
        assert sent["messages"][-1]["content"][len(REASK) :] in [*outcome.reasks, final]
    score, kind, reasks = EXPECTED[name]
    assert (outcome.verdict.score if outcome.verdict else None) == score
    assert (str(outcome.error.kind) if outcome.error else None) == kind
    assert len(outcome.reasks) == reasks
    assert outcome.cassette_key == request_key(key_parts(first, req.rubric_hash, req.prompt_hash))


def test_the_reasons_say_what_went_wrong(mini_rubric: Any) -> None:
    def run(name: str) -> JudgeOutcome:
        judge = InstructorJudge(ScriptBackend(SCRIPTS[name]), mini_rubric, "openai/stub-judge")
        return asyncio.run(judge.judge(request(mini_rubric)))

    malformed = run("malformed JSON, re-asked out")
    assert malformed.error is not None and "JSON is malformed" in malformed.error.message
    assert "no JSON object" not in malformed.error.message
    assert "choose exactly one of: REFUND, CHAT" in run("unknown intent, then valid").reasks[0]
    truncated = run("truncated until the rounds run out")
    assert truncated.error is not None
    assert "max_tokens=1024, 2048, 4096 (3 time(s))" in truncated.error.message
    cleaned = run("cleaned values")
    assert [w.code for w in cleaned.parse_warnings] == [
        WarningCode.SCORE_TEXT_CONVERTED,
        WarningCode.INVISIBLE_CHARACTER_REMOVED,
        WarningCode.JUDGE_VALUE_TRIMMED,
        WarningCode.JUDGE_VALUE_RECASED,
    ]


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


def test_instructor_is_confined_to_one_adapter_on_its_public_api() -> None:
    """Only judge/instructor_adapter.py imports instructor, and only names instructor exports
    (``instructor.__all__`` / ``instructor.v2.__all__``): no private internals, which used to
    pin instructor below 1.18."""
    import re
    from pathlib import Path

    import instructor
    import instructor.v2

    package = Path(__file__).resolve().parent.parent / "rubric_engine"
    importers = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if re.search(r"^\s*(import|from) instructor\b", p.read_text("utf-8"), re.MULTILINE)
    )
    assert importers == ["judge/instructor_adapter.py"]
    source = (package / "judge" / "instructor_adapter.py").read_text("utf-8")
    imports = re.findall(r"^\s*(?:import|from) (instructor[\w.]*)", source, re.MULTILINE)
    assert set(imports) == {"instructor", "instructor.v2"}
    used = set(re.findall(r"\binstructor\.(?!v2\.)(\w+)", source))
    used_v2 = set(re.findall(r"\binstructor\.v2\.(\w+)", source))
    assert used - {"v2"} <= set(instructor.__all__), used
    assert used_v2 <= set(instructor.v2.__all__), used_v2
