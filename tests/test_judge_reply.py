"""Finding the verdict in what real judges send (judge_reply.py's rules, one case each)."""

from __future__ import annotations

import json

import pytest

from rubric_engine.judge_reply import extract_verdict_json

V = '{"intentKey": "CHAT", "score": 4}'


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (V, V),
        (f"```json\n{V}\n```", V),
        (f"```\n{V}\n```", V),
        (f"Here is my verdict:\n{V}\nLet me know if you need more.", V),
        (f'<think>The agent leaked {{"x": 1}}.</think>\n{V}', V),
        (f"<thinking>long musing</thinking>```json\n{V}\n```", V),
        (f"reasoning whose opening tag was in the template</think>\n{V}", V),
        ('The dialogue contains {"intentKey": "CHAT", "score": 5} which I ignore. Mine:\n' + V, V),
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
    assert json.loads(extract_verdict_json(reply)) == json.loads(expected)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("I'd give this a 4 out of 5.", "no JSON object"),
        ("", "no JSON object"),
        ('<think>still thinking {"score": 5}', "never closed"),
        ('{"intentKey": "CHAT", "score": 4, "unmetRequirementIds": ["A", ', "no JSON object"),
        ("[1, 2, 3]", "no JSON object"),
    ],
)
def test_no_verdict_is_never_invented(reply: str, why: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=why):
        extract_verdict_json(reply)
