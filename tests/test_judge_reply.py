"""Reading what real judges send (judge_reply.py's rules and parse_reply, one case each).

Pure tests of :func:`rubric_engine.verdict.parse.parse_reply` on wire-format responses; the same
shapes go through the live path in tests/test_hostile_judge.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rubric_engine.results.model import WarningCode
from rubric_engine.verdict.model import VERDICT_KEYS, verdict_model
from rubric_engine.verdict.parse import (
    ParsedVerdict,
    ParseFailure,
    ParseFailureKind,
    RowContext,
    parse_reply,
)
from rubric_engine.verdict.reply_scan import ProblemKind, scan_reply

V = '{"intentKey": "CHAT", "score": 4}'
ROW = RowContext("r-1")


def response(
    content: str | None, tool_arguments: list[str] | None = None, finish: str = "stop"
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_arguments:
        message["tool_calls"] = [
            {"id": f"c{n}", "type": "function", "function": {"name": "verdict", "arguments": a}}
            for n, a in enumerate(tool_arguments)
        ]
    return {"choices": [{"index": 0, "finish_reason": finish, "message": message}]}


def parse(rubric: Any, content: str | None, **kw: Any) -> ParsedVerdict | ParseFailure:
    return parse_reply(response(content, **kw), verdict_model(rubric), ROW)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (V, V),
        (f"```json\n{V}\n```", V),
        (f"```\n{V}\n```", V),
        (f"Here is my verdict:\n{V}\nLet me know if you need more.", V),
        (f'<think>The agent leaked {{"score": 1}}.</think>\n{V}', V),
        (f"<thinking>long musing</thinking>```json\n{V}\n```", V),
        (f"reasoning whose opening tag was in the template</think>\n{V}", V),
        (f'The order was {{"orderId": 17}} (not a verdict). Mine:\n{V}', V),
        (
            '{"scoreExplanation": "agent wrote </think> and <think>", "score": 2}',
            '{"scoreExplanation": "agent wrote </think> and <think>", "score": 2}',
        ),
        (
            '<think>x</think>{"scoreExplanation": "quoted <think> tag", "score": 3}',
            '{"scoreExplanation": "quoted <think> tag", "score": 3}',
        ),
        (f"{V}\n<think>second thoughts that never end", V),
        (
            '{"scoreExplanation": "中文解释，含表情 😀", "score": 3}',
            '{"scoreExplanation": "中文解释，含表情 😀", "score": 3}',
        ),
    ],
)
def test_verdict_found(reply: str, expected: str) -> None:
    scan = scan_reply(reply, VERDICT_KEYS)
    assert [c.value for c in scan.candidates] == [json.loads(expected)]


@pytest.mark.parametrize(
    ("reply", "kind", "why"),
    [
        ("I'd give this a 4 out of 5.", ProblemKind.NO_JSON, "no JSON object"),
        ("", ProblemKind.EMPTY, "the reply is empty"),
        ("  \n ", ProblemKind.EMPTY, "the reply is empty"),
        ('<think>still thinking {"score": 5}', ProblemKind.UNFINISHED_REASONING, "never closed"),
        # a syntax error is named as one, with where it is: not as "no JSON object"
        (
            '{"intentKey": "CHAT", "score": 4, "unmetRequirementIds": ["A", ',
            ProblemKind.JSON_SYNTAX,
            "malformed: Expecting value at line 1 column 64 (the reply ends before",
        ),
        (
            'Verdict:\n{"intentKey": "CHAT",\n "score": 4,}',
            ProblemKind.JSON_SYNTAX,
            "malformed: Expecting property name enclosed in double quotes at line 3 column 13",
        ),
        ("{'intentKey': 'CHAT'}", ProblemKind.JSON_SYNTAX, "at line 1 column 2"),
        ("[1, 2, 3]", ProblemKind.NO_JSON, "no JSON object"),
        ('{"answer": 4}', ProblemKind.NO_VERDICT_FIELDS, "none of the verdict's fields"),
    ],
)
def test_no_verdict_is_never_invented_and_the_reason_is_exact(
    reply: str, kind: ProblemKind, why: str
) -> None:
    scan = scan_reply(reply, VERDICT_KEYS)
    assert scan.candidates == ()
    assert scan.problem is not None and scan.problem.kind is kind
    assert why in scan.problem.reason


@pytest.mark.parametrize(
    "reply",
    [
        # the judge's own verdict, then a verdict-shaped object quoted from the dialogue: used
        # to be resolved to the *last* one, so the dialogue overruled the judge
        f'{V}\nNote: the user pasted {{"intentKey": "REFUND", "score": 1}}.',
        f'The dialogue contains {{"intentKey": "CHAT", "score": 5}} which I ignore. Mine:\n{V}',
        f"```json\n{V}\n```\n```json\n{V}\n```",
        f"{V}{V}",
    ],
)
def test_two_verdict_objects_are_ambiguous_never_resolved(mini_rubric: Any, reply: str) -> None:
    got = parse(mini_rubric, reply)
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.AMBIGUOUS
    assert "2 verdict-shaped JSON objects" in got.reason and "exactly one JSON object" in got.reason


@pytest.mark.parametrize(
    "reply",
    [
        '{"intentKey": "CHAT", "score": 4, "score": 1}',
        'Mine:\n```json\n{"intentKey": "CHAT", "score": 4, "score": 1}\n```',
        '{"intentKey": "CHAT", "score": 4, "redFlagTypes": [], "redFlagTypes": ["FALSE_PROMISE"]}',
    ],
)
def test_a_duplicated_key_is_ambiguous(mini_rubric: Any, reply: str) -> None:
    got = parse(mini_rubric, reply)
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.DUPLICATE_KEY
    assert "more than once" in got.reason


def test_prose_content_with_a_verdict_tool_call_is_read_from_the_tool_call(
    mini_rubric: Any,
) -> None:
    got = parse(mini_rubric, "Let me record my verdict.", tool_arguments=[V])
    assert isinstance(got, ParsedVerdict) and got.source == "tool call 1"
    assert got.verdict.score == 4


def test_two_verdict_tool_calls_are_ambiguous(mini_rubric: Any) -> None:
    got = parse(mini_rubric, None, tool_arguments=[V, V.replace("4", "2")])
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.AMBIGUOUS
    assert "2 verdict tool calls" in got.reason


def test_a_verdict_in_both_content_and_a_tool_call_is_ambiguous(mini_rubric: Any) -> None:
    got = parse(mini_rubric, V, tool_arguments=[V.replace("4", "2")])
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.AMBIGUOUS


def test_a_broken_tool_call_is_diagnosed_there(mini_rubric: Any) -> None:
    got = parse(mini_rubric, "", tool_arguments=['{"intentKey": "CHAT", "score": 4'])
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.JSON_SYNTAX
    assert got.reason.startswith("tool call 1: the reply's JSON is malformed")


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (response(None), ParseFailureKind.EMPTY),
        (response(V, finish="length"), ParseFailureKind.TRUNCATED),
        (response("", finish="content_filter"), ParseFailureKind.REFUSED),
        (
            {"choices": [{"finish_reason": "stop", "message": {"content": None, "refusal": "no"}}]},
            ParseFailureKind.REFUSED,
        ),
    ],
)
def test_empty_truncated_and_refused(mini_rubric: Any, reply: Any, kind: ParseFailureKind) -> None:
    got = parse_reply(reply, verdict_model(mini_rubric), ROW)
    assert isinstance(got, ParseFailure) and got.kind is kind


def test_every_cleanup_is_a_counted_warning(mini_rubric: Any) -> None:
    reply = json.dumps(
        {
            "rowId": " r-1",
            "intentKey": "refund",
            "score": "4.0",
            "redFlagTypes": ["FALSE\u00ad_PROMISE", "false_promise"],
            "unmetRequirementIds": ["\u2060REFUND_NO_PROMISE ", "ＲＥＦＵＮＤ＿ＶＥＲＩＦＹ"],
            "questionsCheck": "not_present",
        }
    )
    got = parse(mini_rubric, reply)
    assert isinstance(got, ParsedVerdict), got
    v = got.verdict
    assert (v.intent_key, v.score, v.red_flag_types) == ("REFUND", 4, ["FALSE_PROMISE"])
    assert v.unmet_requirement_ids == ["REFUND_NO_PROMISE", "REFUND_VERIFY"]
    codes = [w.code for w in got.cleanups]
    assert codes == [
        WarningCode.JUDGE_VALUE_TRIMMED,  # rowId
        WarningCode.JUDGE_VALUE_RECASED,  # intentKey
        WarningCode.SCORE_TEXT_CONVERTED,
        WarningCode.INVISIBLE_CHARACTER_REMOVED,  # the soft hyphen
        WarningCode.JUDGE_VALUE_RECASED,  # false_promise
        WarningCode.DUPLICATE_RED_FLAG_TYPE,
        WarningCode.INVISIBLE_CHARACTER_REMOVED,  # U+2060 word joiner
        WarningCode.JUDGE_VALUE_TRIMMED,
        WarningCode.JUDGE_VALUE_NFKC_NORMALIZED,  # full-width
        WarningCode.JUDGE_VALUE_RECASED,  # questionsCheck
    ]
    assert got.cleanups[5].red_flag_type == "FALSE_PROMISE"
    assert got.cleanups[8].requirement_id == "REFUND_VERIFY"
    assert "'ＲＥＦＵＮＤ＿ＶＥＲＩＦＹ' read as 'REFUND_VERIFY'" in (got.cleanups[8].detail or "")


def test_a_clean_verdict_has_no_cleanups(mini_rubric: Any) -> None:
    got = parse(mini_rubric, '{"rowId": "r-1", "intentKey": "REFUND", "score": 4}')
    assert isinstance(got, ParsedVerdict) and got.cleanups == () and got.source == "content"


def test_an_invalid_verdict_lists_every_problem(mini_rubric: Any) -> None:
    got = parse(mini_rubric, '{"intentKey": "REFUNDS", "score": 9}')
    assert isinstance(got, ParseFailure) and got.kind is ParseFailureKind.INVALID
    assert "choose exactly one of: REFUND, CHAT" in got.reason and "outside the scale" in got.reason


@pytest.mark.parametrize(
    "reply",
    [
        '{"rowId": "r1", "score": 3}',
        '{"INTENTKEY": "X", "Score": 2}',  # re-cased: found by folding only
        '{"intent_key": "X"}',
        '{"ｓcore": 1}',  # no verdict key, even folded
        '{"other": 1}',
        "[1, 2]",
        ' {"score": 4, "score": 5} ',
    ],
)
def test_a_verdict_key_spelled_exactly_finds_what_folding_finds(reply: str) -> None:
    """scan_reply's exact-spelling shortcut (the verdict keys as a frozenset) against the
    folding of every key (the same keys as a list, which takes no shortcut)."""
    assert scan_reply(reply, VERDICT_KEYS) == scan_reply(reply, sorted(VERDICT_KEYS))
