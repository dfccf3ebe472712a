"""Hostile and edge-case inputs (issue 14): each gives a clear error or warning, no traceback,
and nothing is sent to a judge for a file that is refused."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.errors import DatasetError, RubricError
from rubric_engine.rubric import load_rubric
from tests.conftest import CASES, CASSETTES, MINI_RUBRIC, RUBRICS


def _alias_bomb(levels: int, width: int = 10) -> str:
    """A "billion laughs" block: ``width ** levels`` scalars from a few hundred bytes."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


# -- 1. YAML alias bombs, cycles and deep nesting --------------------------------------------


def test_pack_alias_bomb_is_refused_fast_naming_the_file(tmp_path: Path) -> None:
    """Guards: a ~500-byte pack whose aliases expand to a million nodes took seconds and
    hundreds of MB to validate (a larger one ran away) before being refused for other reasons."""
    path = tmp_path / "bomb.yaml"
    path.write_text(
        MINI_RUBRIC
        + "scoringNotes:\n  - x\nbomb:\n"
        + "".join(f"  {line}\n" for line in _alias_bomb(6).splitlines()),
        encoding="utf-8",
    )
    started = time.perf_counter()
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    assert time.perf_counter() - started < 5.0  # shared machine: generous
    message = str(info.value)
    assert re.search(
        rf"{re.escape(str(path))}:1: rubric file refused: aliases expand this "
        r"document to 1,\d{3},\d{3} nodes",
        message,
    )
    assert "`*name`" in message


def test_pack_with_modest_alias_reuse_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "reuse.yaml"
    text = MINI_RUBRIC.replace(
        "scoreScale: {min: 1, max: 5}", "scoreScale: &scale {min: 1, max: 5}"
    )
    path.write_text(text + "scoringNotes: &notes [one, two]\n", encoding="utf-8")
    assert load_rubric(path).key == "mini"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("a: &a [x, *a]\n", "a cycle"),
        ("a: " + "[" * 500 + "]" * 500 + "\n", "nesting deeper than 100 levels"),
    ],
)
def test_pack_cycle_or_deep_nesting_is_an_error_not_a_recursion_error(
    tmp_path: Path, body: str, expected: str
) -> None:
    """Guards: a recursive alias or 500 nested lists ended in RecursionError (a traceback)."""
    path = tmp_path / "p.yaml"
    path.write_text(MINI_RUBRIC + body, encoding="utf-8")
    with pytest.raises(RubricError, match=expected):
        load_rubric(path)


def test_case_yaml_alias_bomb_is_refused_with_its_line(tmp_path: Path) -> None:
    """Guards: the seed-000 YAML reader had the same unlimited loader as the pack loader."""
    path = tmp_path / "cases.yaml"
    path.write_text(
        "id: c1\ninput: hi\nactual_output: hello\nmetadata:\n"
        + "".join(f"  {line}\n" for line in _alias_bomb(6).splitlines()),
        encoding="utf-8",
    )
    started = time.perf_counter()
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert time.perf_counter() - started < 5.0  # shared machine: generous
    assert f"{path}:1" in str(info.value) and "refused: aliases expand" in str(info.value)


# -- 2. CSV: unbalanced quotes, line breaks inside fields -------------------------------------


def test_csv_unbalanced_quote_is_refused_with_the_line_it_opened(tmp_path: Path) -> None:
    """Guards: an unclosed quote swallowed every later line into one field; the file was
    judged as one merged row and the run exited 0."""
    path = tmp_path / "broken.csv"
    path.write_text(
        'rowId,user,assistant\nr1,"hi","hello\nthere"\nr2,"oops,hello\nr3,a,b\nr4,c,d\n',
        encoding="utf-8",
    )
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    (problem,) = info.value.problems
    assert problem.where == f"{path}:4"
    assert "the quoted field that starts on line 4 is never closed" in problem.message


def test_csv_stray_quote_inside_a_quoted_field_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "stray.csv"
    path.write_text('rowId,user,assistant\nr1,hi,"she said "no" twice"\nr2,a,b\n', "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    (problem,) = info.value.problems
    assert problem.where == f"{path}:2" and "expected after '\"'" in problem.message
    assert 'written twice ("")' in problem.message


def test_csv_and_jsonl_of_one_dialogue_give_the_same_row(tmp_path: Path) -> None:
    """Guards: a CRLF inside a quoted CSV field stayed ``\\r\\n`` while the JSONL twin had
    ``\\n``, so the same dialogue sent the judge two different requests."""
    csv_path = tmp_path / "d.csv"
    csv_path.write_bytes(
        b'rowId,user,assistant,scenario\r\nd1,"line one\r\nline two","ok\r\n\r\nfine\rend",x\r\n'
    )
    jsonl_path = tmp_path / "d.jsonl"
    jsonl_path.write_text(
        '{"rowId": "d1", "messages": [{"role": "user", "content": "line one\\nline two"}, '
        '{"role": "assistant", "content": "ok\\n\\nfine\\nend"}], "scenario": "x"}\n',
        encoding="utf-8",
    )
    (from_csv,) = list(DialogueSource(csv_path))
    (from_jsonl,) = list(DialogueSource(jsonl_path))
    assert from_csv == from_jsonl


# -- 3. Deep or unstorable JSON: refused at validation, before any judge call -----------------


def _deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


def _demo_row(**extra: object) -> str:
    first = json.loads((CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()[0])
    return json.dumps({**first, **extra}, ensure_ascii=False)


def test_deep_metadata_is_refused_before_any_call_and_nothing_is_stored(tmp_path: Path) -> None:
    """Guards: metadata nested 300 levels passed validation, was judged (paid for), then the
    store could not serialize it (pydantic's depth limit) and the run crashed; a resume paid
    again."""
    path = tmp_path / "deep.jsonl"
    path.write_text(_demo_row(metadata={"m": _deep(300)}) + "\n", encoding="utf-8")
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(
        app,
        [
            "score",
            str(path),
            "-r",
            str(RUBRICS / "health_cs.yaml"),
            "--draft",
            "--cassettes",
            str(CASSETTES),
            "--store",
            str(store),
            "--out",
            str(tmp_path / "out"),
            "-q",
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"{path}:1: metadata.m.a… (100 levels down): nested more than 100 levels" in (
        result.output
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # Python's json decoder recursed into RecursionError on 5000 nested arrays
        ('{"rowId": "r", "messages": ' + "[" * 5000 + "]" * 5000 + "}", "JSON nested far"),
        (_demo_row(metadata={"score": float("nan")}), "metadata.score: nan is not a JSON number"),
        (_demo_row(metadata={"note": "\ud800"}).replace("\ud800", "\\ud800"), "lone surrogate"),
    ],
)
def test_unstorable_json_is_a_row_problem(tmp_path: Path, line: str, expected: str) -> None:
    """Guards: NaN passed validation and reached report.json as invalid JSON; a lone surrogate
    decoded fine and failed when SQLite encoded it, after the judge call."""
    path = tmp_path / "rows.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert expected in str(info.value)


def test_otel_json_string_attribute_is_checked_like_the_row(tmp_path: Path) -> None:
    """Guards: the OTel adapter decodes JSON *strings*; the row check saw only the string."""
    deep = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "name": "f", "arguments": _deep(150)}],
            }
        ]
    )
    path = tmp_path / "otel.jsonl"
    path.write_text(
        json.dumps({"rowId": "o1", "gen_ai.input.messages": "[]", "gen_ai.output.messages": deep})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DatasetError, match=r"gen_ai\.output\.messages \(JSON text\) \[0\]\.parts"):
        DialogueSource(path).validate()
