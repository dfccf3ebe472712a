"""The input check gives the same outcome however rows arrive and however a place is kept:

- the rows, or the problems, of a JSONL file are those of the same objects given in memory;
- a canonical ``{role, content}`` message is kept as the full reading makes it;
- a BOM at the start of a JSONL file is dropped as ``utf-8-sig`` drops it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource, MemorySource
from rubric_engine.dialogue.shapes import row_from_object
from rubric_engine.errors import DatasetError

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from(list('ab:é"\\\n\u2028 ')), max_size=6),
)


TEXT = st.text(alphabet=st.sampled_from(list("ab: é\n")), max_size=8)
#: what may refuse a row: wrong types, NaN, a lone surrogate, nesting
BAD = st.one_of(
    SCALARS,
    st.sampled_from([float("nan"), "\ud800", [[[[]]]], {"a": {"b": None}}, ["x", 1.5], {}]),
)


def _mostly(good: Any) -> Any:
    """``good`` four times in five, else a value that may refuse the row."""
    return st.integers(0, 4).flatmap(lambda n: BAD if n == 0 else good)


MESSAGE = st.fixed_dictionaries(
    {
        "role": _mostly(st.sampled_from(["user", "assistant", "assistant", "tool"])),
        "content": _mostly(TEXT),
    },
    optional={"name": _mostly(TEXT), "tool_calls": _mostly(st.just([]))},
)
ROWS = st.fixed_dictionaries(
    {"messages": _mostly(st.lists(MESSAGE, min_size=1, max_size=3))},
    optional={
        "rowId": _mostly(st.sampled_from(["r1", "r2", " r1 ", "", 7, None, "a\nb"])),
        "metadata": _mostly(st.dictionaries(st.sampled_from(["k", "n"]), TEXT | BAD, max_size=2)),
        "trace": _mostly(st.none()),
        "expected": _mostly(st.just([])),
        "extra": _mostly(TEXT),
    },
)


def _line(row: dict[str, Any]) -> str:
    """The row as JSON: its text as is, or with ``\\u`` escapes when it holds a lone
    surrogate (the reader checks the strings of a line with such escapes only)."""
    text = json.dumps(row, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(row)
    return text


def _checked(read: Any, place: Any) -> Any:
    """The rows read, or every problem with its places written as ``@<row number>``."""
    try:
        rows = read()
    except DatasetError as exc:
        return "problems", [(place(p.where), p.field, place(p.message)) for p in exc.problems]
    return "rows", [row.model_dump(mode="python") for row in rows]


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(ROWS, min_size=1, max_size=3))
def test_a_file_s_rows_check_as_the_same_rows_in_memory(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    """A file's rows check as the same rows given in memory. Their places differ
    (``file:1``, ``rows[0]``) and are compared as row numbers; the file
    is named ``row.jsonl``, so that ids made for rows without one (``row-1``) agree."""
    path = tmp_path / "row.jsonl"
    path.write_text("".join(_line(row) + "\n" for row in rows), encoding="utf-8")
    in_file = re.compile(re.escape(str(path)) + r":(\d+)")
    in_memory = re.compile(r"rows\[(\d+)\]")
    from_file = _checked(lambda: DialogueSource(path).read(), lambda t: in_file.sub(r"@\1", t))
    from_memory = _checked(
        lambda: MemorySource(rows).read(),
        lambda t: in_memory.sub(lambda m: f"@{int(m[1]) + 1}", t),
    )
    assert from_file == from_memory


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": TEXT}
        ),
        min_size=1,
        max_size=4,
    ).map(lambda m: [*m, {"role": "assistant", "content": "a"}])
)
def test_a_canonical_message_is_kept_as_the_full_reading_makes_it(
    messages: list[dict[str, Any]],
) -> None:
    """``{role, content}`` is taken as it is; a ``name: null`` beside it sends the same
    message through the full reading: the rows agree, in value and in the JSON the spool and
    the store write."""
    quick = row_from_object({"rowId": "r", "messages": messages}, "d")
    full = row_from_object({"rowId": "r", "messages": [{**m, "name": None} for m in messages]}, "d")
    assert quick == full
    assert quick.model_dump(mode="json", by_alias=True) == full.model_dump(
        mode="json", by_alias=True
    )
    to_json = DialogueRow.__pydantic_serializer__.to_json
    assert to_json(quick, round_trip=True) == to_json(full, round_trip=True)


_ROW = json.dumps(
    {
        "rowId": "r1",
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    }
)
_BOM_PROBLEM = (
    "not valid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig) at column 1); each line "
    "must be one JSON object"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\ufeff" + _ROW + "\n", ["r1"]),
        ("\ufeff\n" + _ROW + "\n", ["r1"]),
        ("\ufeff\ufeff" + _ROW + "\n", [(1, _BOM_PROBLEM)]),  # one BOM is dropped, not two
        (_ROW + "\n\ufeff" + _ROW.replace("r1", "r2"), [(2, _BOM_PROBLEM)]),  # not at the start
        ("\ufeff", "no rows found"),
    ],
)
def test_the_jsonl_reader_drops_one_bom_at_the_start_as_utf_8_sig_did(
    tmp_path: Path, text: str, expected: Any
) -> None:
    """The file is read as UTF-8 and its BOM dropped by the reader (``utf-8-sig`` decoded
    each block in Python): what is read is what ``utf-8-sig`` gave."""
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    try:
        got: Any = [row.row_id for row in DialogueSource(path).read()]
    except DatasetError as exc:
        got = [(int(p.where.rsplit(":", 1)[1]), p.message) for p in exc.problems] or str(exc)
    if isinstance(expected, str):
        assert expected in got
    else:
        assert got == expected
