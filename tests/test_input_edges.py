"""Hostile and edge-case inputs (issue 14): each gives a clear error or warning, no traceback,
and nothing is sent to a judge for a file that is refused."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.errors import DatasetError, RubricError
from rubric_engine.rubric import load_rubric
from tests.conftest import MINI_RUBRIC


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
