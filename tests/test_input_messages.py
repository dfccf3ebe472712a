"""Input errors that point at the real problem (a newcomer's findings): the column where a
cut-off JSONL line ends, the line and file offset of a byte that is not UTF-8, rowIds made from
the file name, and JSON in a CSV ``metadata`` column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.errors import DatasetError

ROW = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def _problems(path: Path, *more: Path) -> list[str]:
    seen: dict[str, str] = {}
    with pytest.raises(DatasetError) as info:
        for source in (path, *more):
            DialogueSource(source).validate(seen)
    return [f"{p.where}: {p.message}" for p in info.value.problems] or [str(info.value)]


def test_a_cut_off_jsonl_line_is_placed_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"rowId":"x","messages": [\n')
    (message,) = _problems(path)
    assert "Expecting value at column 27: the line ends before the JSON is complete" in message
    assert "column 1" not in message


def test_an_unterminated_string_has_one_at(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    line = '{"rowId":"x","messages": [{"role":"assistant","content":"abc'
    path.write_text(line)  # no newline: the string runs to the end of the file
    (message,) = _problems(path)
    assert "at at" not in message
    column = line.index('"abc') + 1
    assert f"Unterminated string starting at column {column}: the line ends before" in message


def test_a_cut_off_json_file_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[{"rowId":"x",\n"messages": [\n')
    (message,) = _problems(path)
    assert "at line 2 column 14: the file ends before the JSON is complete" in message


def test_a_non_utf8_byte_deep_in_a_big_file_gives_line_and_file_offset(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = (json.dumps({"rowId": "r", **ROW}) + "\n").encode()
    bad = line.replace(b"hello", b"caf\xe9!")
    data = line * 19_999 + bad
    path.write_bytes(data)
    (message,) = _problems(path)
    offset = data.index(bytes([0xE9]))
    assert "big.jsonl:20000: not UTF-8 text" in message
    assert f"at byte {offset} of the file" in message


def test_rows_without_rowid_in_two_files_of_one_name(tmp_path: Path) -> None:
    for folder in ("d1", "d2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rows.jsonl").write_text(json.dumps(ROW) + "\n")
    (message,) = _problems(tmp_path / "d1" / "rows.jsonl", tmp_path / "d2" / "rows.jsonl")
    assert "duplicate rowId 'rows-1'" in message
    assert "neither this row nor the one at" in message and "d1/rows.jsonl:1 " in message
    assert "made from the file name and line" in message
    assert "give the rows a `rowId`, or rename one of the files" in message


def test_a_made_rowid_that_meets_an_explicit_one(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"rowId": "rows-2", **ROW}) + "\n" + json.dumps(ROW) + "\n")
    (message,) = _problems(path)
    assert "this row has no rowId" in message and "rows.jsonl:1" in message
    assert "give this row a `rowId`" in message
    other = tmp_path / "b.jsonl"
    other.write_text(json.dumps(ROW) + "\n" + json.dumps({"rowId": "b-1", **ROW}) + "\n")
    (message,) = _problems(other)
    assert "the row at" in message and "b.jsonl:1 has no rowId" in message
    plain = tmp_path / "c.jsonl"
    plain.write_text(json.dumps({"rowId": "k", **ROW}) + "\n" + json.dumps({"rowId": "k", **ROW}))
    (message,) = _problems(plain)
    assert "duplicate rowId 'k' (first at" in message and "rowIds must be unique" in message


def test_a_csv_metadata_column_holds_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text('rowId,user,assistant,metadata,scenario\nc1,hi,hello,"{""a"":1}",triage\n')
    (row,) = DialogueSource(path).read()
    assert row.metadata == {"a": 1, "scenario": "triage"}
    path.write_text("rowId,user,assistant,metadata\nc1,hi,hello,abc\nc2,hi,hello,[1]\n")
    first, second = _problems(path)
    assert "m.csv:2: the metadata column is not JSON" in first
    assert "write it as a JSON object such as" in first and "a column of its own" in first
    assert "holds JSON list, not an object" in second


def test_rows_in_memory_name_their_made_rowids() -> None:
    from rubric_engine.dialogue.readers import MemorySource

    with pytest.raises(DatasetError) as info:
        MemorySource([{"rowId": "row-2", **ROW}, ROW]).read()
    (problem,) = info.value.problems
    assert problem.where == "rows[1]" and "`row-<n>` for rows given in memory" in problem.message
    assert "rows[0] gives; give this row a `rowId`" in problem.message
