"""A number too long for Python (more than ``sys.get_int_max_str_digits()`` digits) in an input
row, a CSV cell or a cassette line is refused like any other JSON the reader cannot read: exit 2
with the file and line, never a traceback (before: ValueError from the int conversion, exit 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rubric_engine.formats.jsonl import loads, loads_strict
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run

HUGE = "7" * (sys.get_int_max_str_digits() + 1)
HEALTH = CASES / "health_consult_zh.jsonl"


def score(tmp_path: Path, rows: Path, cassettes: Path = CASSETTES) -> tuple[int, str]:
    return run(
        "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", cassettes,
        "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out", "--display", "none",
    )  # fmt: skip


@pytest.mark.parametrize("reader", [loads, loads_strict])
def test_the_readers_name_the_number_s_place(reader) -> None:  # type: ignore[no-untyped-def]
    text = '{"a": 1, "b": ' + HUGE + "}"
    with pytest.raises(json.JSONDecodeError) as got:
        reader(text)
    assert got.value.pos == text.index(HUGE) and "more than 4300 digits" in got.value.msg
    assert reader('{"a": 12345678901234567890123}') == {"a": 12345678901234567890123}


def test_a_long_number_in_a_jsonl_row_is_refused_by_line(tmp_path: Path) -> None:
    lines = HEALTH.read_text("utf-8").splitlines()
    row = json.loads(lines[1])
    lines[1] = json.dumps(row, ensure_ascii=False)[:-1] + ', "metadata": {"n": ' + HUGE + "}}"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = score(tmp_path, rows)
    assert code == 2 and "Traceback" not in out, out
    assert f"{rows}:2" in out and "more than 4300 digits" in out, out


def test_a_long_number_in_a_csv_cell_is_refused_by_line_and_column(tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text(
        f'rowId,user,assistant,metadata\nr1,hi,hello,"{{""n"": {HUGE}}}"\n',
        encoding="utf-8",
    )
    code, out = score(tmp_path, rows)
    assert code == 2 and "Traceback" not in out, out
    assert f"{rows}:2" in out and "metadata" in out and "more than 4300 digits" in out, out


def test_a_long_number_in_a_cassette_line_is_refused_by_line(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes" / "health_cs"
    folder.mkdir(parents=True)
    source = CASSETTES / "health_cs" / "health_consult_zh.jsonl"
    lines = source.read_text("utf-8").splitlines()
    lines[2] = lines[2][:-1] + ', "n": ' + HUGE + "}"
    (folder / source.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = run("cassette", "check", tmp_path / "cassettes")
    assert code == 2 and "Traceback" not in out, out
    assert f"{source.name}:3: not valid JSON (a number has more than 4300 digits" in out, out
    code, out = score(tmp_path, HEALTH, tmp_path / "cassettes")
    assert code == 2 and "Traceback" not in out and "more than 4300 digits" in out, out
    lines[2] = lines[2][:20] + "\x01" + lines[2][20:]  # json's message ends "at": its column
    (folder / source.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = run("cassette", "check", tmp_path / "cassettes")
    assert code == 2 and "not valid JSON (Invalid control character at column 21" in out, out


def test_a_long_number_in_a_yaml_case_is_refused_before_any_call(tmp_path: Path) -> None:
    # decimal: YAML's int() refused it inside the reader (traceback); hex: YAML reads any
    # length, and the row failed to be stored after its judge call was paid for
    for name, number in (("decimal", HUGE), ("hex", "0x" + "f" * 4000)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"id: c1\ninput: hi\nactual_output: hello\nmetadata:\n  n: {number}\n", "utf-8"
        )
        code, out = score(tmp_path / name, path)
        assert code == 2 and "Traceback" not in out, out
        assert f"{path}:" in out and "digits" in out, out


def test_a_long_number_in_a_pack_is_refused_with_its_line(tmp_path: Path) -> None:
    pack = (RUBRICS / "health_cs.yaml").read_text("utf-8")
    bad = tmp_path / "pack.yaml"
    bad.write_text(pack.replace("version: 1", f"version: {HUGE}", 1), "utf-8")
    assert bad.read_text("utf-8") != pack
    code, out = run("rubric", "validate", bad)
    assert code == 2 and "Traceback" not in out and "more than 4300 digits" in out, out
