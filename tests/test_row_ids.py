"""The report's compact rowId lists (report/row_ids.py): they read as the tuples they
replace, and :func:`json_chunks` writes exactly what ``json.dumps(..., indent=2)`` writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.report.model import IssueCluster, RedFlagCount
from rubric_engine.report.row_ids import _CHUNK_IDS, RowIds, json_chunks

ids_text = st.text(st.characters(codec="utf-8"), max_size=12)


def _lists(value: Any) -> Any:
    """``value`` with every RowIds as the list it reads as (what json.dumps is given)."""
    if isinstance(value, RowIds):
        return list(value)
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.lists(ids_text, max_size=6).map(RowIds.of),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_json_chunks_write_what_json_dumps_writes(value: Any) -> None:
    expected = json.dumps(_lists(value), ensure_ascii=False, indent=2)
    assert "".join(json_chunks(value)) == expected


class Level(IntEnum):
    LOW = 1


class Kind(StrEnum):
    A = "a"


def test_json_chunks_write_keys_and_enums_as_json_dumps_does() -> None:
    value: dict[Any, Any] = {
        3: Level.LOW,
        2.5: Kind.A,
        True: None,
        None: [1e-05, float("nan"), -0.0],
        'ü"\n': RowIds.of(["x", 'q"', "é"]),
        "e": RowIds.of(()),
        "": {},
        "l": [],
    }
    assert "".join(json_chunks(value)) == json.dumps(_lists(value), ensure_ascii=False, indent=2)
    with pytest.raises(TypeError, match="keys must be"):
        "".join(json_chunks({(1, 2): 3}))


def test_a_long_list_is_written_in_chunks_of_many_ids() -> None:
    ids = RowIds.of(f"row-{i}" for i in range(_CHUNK_IDS * 2 + 3))
    chunks = list(ids.json_chunks(2))
    assert len(chunks) == 4  # three batches and the closing bracket
    assert "".join(chunks) == json.dumps(list(ids), indent=2).replace("\n", "\n    ")


def test_row_ids_read_as_the_tuple_they_replace() -> None:
    every = ["a", "bé", "", "\ud800", "c"]  # a lone surrogate, as a JSON escape gives
    reads: list[int] = []

    def read() -> Iterator[str]:
        reads.append(1)
        return (every[i] for i in (4, 1, 3))

    ids = RowIds(3, read)
    as_tuple = ("c", "bé", "\ud800")
    assert len(ids) == 3 and not reads and list(ids) == list(as_tuple)
    assert ids[0] == "c" and ids[-1] == "\ud800" and ids[:2] == ("c", "bé")
    assert ids[::-1] == as_tuple[::-1] and ids[1::2] == ("bé",)
    with pytest.raises(IndexError):
        ids[3]
    assert ids == as_tuple and ids == RowIds.of(as_tuple) and hash(ids) == hash(as_tuple)
    assert ids != ("c",) and ids != ["c", "bé", "\ud800"]  # a tuple is never equal to a list
    assert "bé" in ids and "a" not in ids
    assert RowIds.of(every) == ("a", "bé", "", "\ud800", "c")
    shown = "RowIds(['0', '1', '2', '3', '4', … 2 more])"
    assert repr(RowIds.of(str(i) for i in range(7))) == shown


def test_a_report_section_takes_lists_and_dumps_lists() -> None:
    flag = RedFlagCount(type="T", text=None, count=2, row_ids=["r1", "r2"])
    assert isinstance(flag.row_ids, RowIds) and flag.row_ids == ("r1", "r2")
    assert flag.to_json_dict()["rowIds"] == ["r1", "r2"]
    assert flag.model_dump()["row_ids"] == ("r1", "r2")
    assert RedFlagCount.model_validate(flag.to_json_dict()) == flag
    assert RedFlagCount.model_validate_json(json.dumps(flag.to_json_dict())) == flag
    tree = flag.json_tree()
    assert list(tree) == ["type", "text", "count", "rowIds"] and tree["rowIds"] is flag.row_ids
    with pytest.raises(ValueError, match="list of strings"):
        RedFlagCount(type="T", text=None, count=1, row_ids=[1])
    schema = IssueCluster.model_json_schema(by_alias=True)["properties"]["rowIds"]
    assert schema == {"type": "array", "items": {"type": "string"}, "title": "Rowids"}
