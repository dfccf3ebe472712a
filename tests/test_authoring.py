"""Cassette authoring reads each authored response with the same parse_reply replay applies.

The shipped demo cassettes were authored from cases/verdicts/*.jsonl; authoring them again
must give the same keys and the same responses (the request preparation and cassette keys
are unchanged), and a verdict a replay would re-ask is refused with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.errors import CassetteError
from rubric_engine.judge.cassettes.authoring import author_cassette

ROOT = Path(__file__).resolve().parent.parent


def entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_authoring_the_demo_verdicts_again_gives_the_shipped_cassette(tmp_path: Path) -> None:
    out = tmp_path / "health.jsonl"
    n = author_cassette(
        [ROOT / "cases" / "health_consult_zh.jsonl"],
        ROOT / "rubrics" / "health_cs.yaml",
        ROOT / "cases" / "verdicts" / "health_cs.jsonl",
        "test",
        "re-authored by the test suite",
        out,
        "openai/gpt-4o-mini",
    )
    shipped = entries(ROOT / "cassettes" / "health_cs" / "health_consult_zh.jsonl")
    again = entries(out)
    assert n == len(shipped) == len(again)
    assert [(e["key"], e["rowId"], e["keyParts"]) for e in again] == [
        (e["key"], e["rowId"], e["keyParts"]) for e in shipped
    ]
    content = [e["attempts"][0]["response"]["choices"][0]["message"]["content"] for e in again]
    assert content == [
        e["attempts"][0]["response"]["choices"][0]["message"]["content"] for e in shipped
    ]
    assert {e["provenance"]["kind"] for e in again} == {"authored"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"intentKey": "NOT_AN_INTENT"}, "is not in the rubric"),
        ({"score": 9}, "outside the scale"),
    ],
)
def test_an_invalid_authored_verdict_is_refused_with_the_reason(
    tmp_path: Path, change: dict, why: str
) -> None:
    source = ROOT / "cases" / "verdicts" / "health_cs.jsonl"
    verdicts = entries(source)
    verdicts[0].update(change)
    bad = tmp_path / "verdicts.jsonl"
    bad.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in verdicts), "utf-8")
    with pytest.raises(CassetteError, match=why) as info:
        author_cassette(
            [ROOT / "cases" / "health_consult_zh.jsonl"],
            ROOT / "rubrics" / "health_cs.yaml",
            bad,
            "test",
            "broken on purpose",
            tmp_path / "out.jsonl",
            "openai/gpt-4o-mini",
        )
    assert repr(verdicts[0]["rowId"]) in str(info.value)
