"""One cassette entry the replay cannot read is that row's error, not the batch's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rubric_engine.judge.cassettes.cassette import response_problem
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run

CASSETTE = CASSETTES / "health_cs" / "health_consult_zh.jsonl"


def broken_copy(tmp_path: Path) -> Path:
    """The demo cassette with row 3 as a streamed chunk and row 5 as an event stream."""
    folder = tmp_path / "cassettes"
    shutil.copytree(CASSETTES / "health_cs", folder / "health_cs")
    lines = CASSETTE.read_text("utf-8").splitlines()
    chunk = json.loads(lines[2])
    whole = chunk["attempts"][0]["response"]
    chunk["attempts"][0]["response"] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": whole.get("model"),
        "choices": [{"index": 0, "delta": whole["choices"][0]["message"], "finish_reason": None}],
    }
    stream = json.loads(lines[4])
    stream["attempts"][0]["response"] = 'data: {"choices":[{"delta":{"content":"{"}}]}\n\n'
    lines[2], lines[4] = json.dumps(chunk), json.dumps(stream)
    (folder / "health_cs" / CASSETTE.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_an_unreadable_entry_is_that_rows_error_and_the_batch_goes_on(tmp_path: Path) -> None:
    # before: a chat.completion.chunk ended the replay in a traceback with no report, and an
    # event stream made the whole cassette file invalid
    folder = broken_copy(tmp_path)
    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--cassettes", folder, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out",
        "--display", "none",
    )  # fmt: skip
    assert code == 4, out
    assert "Traceback" not in out
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    failed = {r["rowId"]: r["error"]["message"] for r in rows if r["status"] == "JUDGE_ERROR"}
    assert set(failed) == {"medgpt-3", "medgpt-7"}
    assert "chat.completion.chunk" in failed["medgpt-3"]
    assert "event stream" in failed["medgpt-7"]
    assert sum(r["status"] == "SCORED" for r in rows) == 24


def test_cassette_check_says_why_an_entry_cannot_be_replayed(tmp_path: Path) -> None:
    folder = broken_copy(tmp_path)
    code, out = run("cassette", "check", folder)
    assert code == 2, out
    assert ":3: row 'medgpt-3' response 1: it is a chat.completion.chunk" in out
    assert ":5: row 'medgpt-7' response 1: it is a server-sent event stream" in out
    code, out = run("cassette", "check", CASSETTES)
    assert code == 0, out


def test_response_problem_accepts_only_a_whole_chat_completion() -> None:
    whole = json.loads(CASSETTE.read_text("utf-8").splitlines()[0])["attempts"][0]["response"]
    assert response_problem(whole) is None
    assert response_problem({"object": "chat.completion", "choices": []}) == "it has no choices"
    assert "no message" in (response_problem({"choices": [{"delta": {}}]}) or "")
    assert "it is a JSON array, not" in (response_problem([whole]) or "")
    assert response_problem(None) == "it is null, not a chat.completion object"  # "NoneType"
    assert response_problem(3) == "it is a number, not a chat.completion object"


@pytest.mark.parametrize(
    ("verdicts", "pack"),
    [
        ("airline_cs.jsonl", "airline_cs.yaml"),
        ("health_cs.jsonl", "health_cs.yaml"),
        ("health_cs_worse.jsonl", "health_cs.yaml"),
        ("airline_cs_v3.jsonl", "airline_cs.yaml"),
        ("health_cs_v3.jsonl", "health_cs.yaml"),
    ],
)
def test_an_authored_score_follows_the_caps_of_its_own_unmet_requirements(
    verdicts: str, pack: str
) -> None:
    # an independent re-judgment found airline-4, -5 and -6 scored above the violationScore
    # of a requirement their own verdict lists as unmet; the engine lowered them, but an
    # authored answer follows the pack's scoring notes
    import yaml

    rubric = yaml.safe_load((RUBRICS / pack).read_text("utf-8"))
    caps = {
        r["id"]: r["violationScore"]
        for r in [
            *rubric.get("commonRequirements", []),
            *(r for i in rubric["intents"] for r in i.get("requirements", [])),
        ]
        if r.get("violationScore") is not None
    }
    above = []
    for line in (CASES / "verdicts" / verdicts).read_text("utf-8").splitlines():
        verdict = json.loads(line)
        lowest = min((caps[r] for r in verdict["unmetRequirementIds"] if r in caps), default=None)
        if lowest is not None and verdict["score"] > lowest:
            above.append((verdict["rowId"], verdict["score"], lowest))
    assert above == []


@pytest.mark.parametrize("name", ["airline_cs", "health_cs"])
def test_the_v3_verdicts_keep_the_v1_judgments(name: str) -> None:
    # the judge_v3 verdicts are the v1 judgments plus evidence turns (cases/verdicts/README.md);
    # a v1 verdict mended later (airline-4, -5, -6) must be mended in its v3 twin as well
    fields = ("intentKey", "score", "redFlagTypes", "unmetRequirementIds", "partialRequirementIds")

    def read(path: Path) -> dict[str, tuple[object, ...]]:
        lines = path.read_text("utf-8").splitlines()
        return {v["rowId"]: tuple(v[f] for f in fields) for v in map(json.loads, lines)}

    verdicts = CASES / "verdicts"
    assert read(verdicts / f"{name}_v3.jsonl") == read(verdicts / f"{name}.jsonl")


def test_cassette_check_names_a_line_whose_object_names_a_key_twice(tmp_path: Path) -> None:
    # two "response" members in one attempt replayed the last one, and check passed the file
    folder = tmp_path / "cassettes"
    shutil.copytree(CASSETTES / "health_cs", folder / "health_cs")
    path = folder / "health_cs" / CASSETTE.name
    lines = path.read_text("utf-8").splitlines()
    entry = json.loads(lines[1])
    response = json.dumps(entry["attempts"][0]["response"], ensure_ascii=False)
    head, _, _ = lines[1].rpartition('"attempts": ')
    lines[1] = f'{head}"attempts": [{{"response": {response}, "response": {response}}}]}}'
    assert json.loads(lines[1])["attempts"] == entry["attempts"]  # json alone sees nothing
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = run("cassette", "check", folder)
    assert code == 2, out
    assert f"{path}:2: the key 'response' appears twice in one object" in out
    assert "so the line is ambiguous" in out and "1 bad cassette line(s)" in out
