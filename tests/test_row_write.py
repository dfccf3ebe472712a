"""How a finished row is written (issue 18, per-row CPU of a replay): one upsert statement on
both backends (SQLite's ``INSERT OR REPLACE`` checked the foreign key for a delete too), new
SQLite files made with 32 KB pages (older stores keep theirs), and the row columns' JSON made
by encoders built once (``canonical.encoder_built_once``). Each keeps what was stored and
read before: the same rows after a row is written again, the same report files from an old
store and a new one, and the same column text as ``json``'s own encoders give."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rubric_engine.store.sqlite as sqlite_backend
from rubric_engine.formats.canonical import encoder_built_once as _one_shot
from rubric_engine.store.task_store import _RESULT_ENCODER, _ROW_ENCODER, TaskStore
from tests.test_store_backends import DEMOS, read_files, score_demo


def test_a_row_stored_again_replaces_the_first_and_only_in_its_task(
    store_at: str, tmp_path: Path
) -> None:
    """A resumed row is stored again under its rowId: the upsert replaces every column (seq
    too) of that task's row; the same rowId in another task is another row."""
    source = score_demo(store_at, *DEMOS[0], tmp_path / "out")
    with TaskStore(store_at) as store:
        task = store.task(source)
        target = task.id + "-again"
        store.create_task(dataclasses.replace(task, id=target, state="RUNNING"))
        first, second = list(store.rows(source))[:2]
        store.add_row(target, first)
        store.commit()
        # another row's columns under the first row's rowId, at another place in the input
        again = dataclasses.replace(
            second,
            seq=7,
            result=second.result.model_copy(update={"row_id": first.result.row_id}),
            cache_read_tokens=11,
        )
        store.add_row(target, again)
        store.commit()
        assert list(store.rows(target)) == [again]
        assert list(store.rows(source))[:2] == [first, second]  # the source task's rows kept


def test_a_row_of_a_task_not_in_the_store_is_still_refused(tmp_path: Path) -> None:
    """The upsert keeps the rows → tasks foreign key checked (``PRAGMA foreign_keys=ON``)."""
    source = score_demo(tmp_path / "s.sqlite", *DEMOS[0], tmp_path / "out")
    with TaskStore(tmp_path / "s.sqlite") as store:
        row = next(store.rows(source))
        store.add_row("no-such-task", row)
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            store.commit()


def test_a_new_sqlite_store_has_32k_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store made before this change (SQLite's 4 KB pages) keeps its page size, takes more
    rows, and rebuilds report files byte for byte equal to a new store's of the same run."""
    new, old = tmp_path / "new.sqlite", tmp_path / "old.sqlite"
    tasks = {"new": score_demo(new, *DEMOS[0], tmp_path / "new")}
    with monkeypatch.context() as patched:  # the engine before: SQLite's default page size
        patched.setattr(sqlite_backend, "NEW_STORE_PAGE_SIZE", 4096)
        tasks["old"] = score_demo(old, *DEMOS[0], tmp_path / "old-first")
    tasks["old-again"] = score_demo(old, *DEMOS[0], tmp_path / "old")  # written by this engine
    for path, size in ((new, sqlite_backend.NEW_STORE_PAGE_SIZE), (old, 4096)):
        with TaskStore(path) as store:
            assert store.connection.execute("PRAGMA page_size").fetchone() == (size,)
    from tests.test_cli import run

    for name, path in (("old", old), ("old-again", old), ("new", new)):
        code, out = run("report", tasks[name], "--store", path, "--out", tmp_path / "re" / name)
        assert code == 0, out
    files = {name: read_files(tmp_path / "re" / name) for name in ("old", "old-again", "new")}
    assert len(files["new"]) == 4
    for name, task in (("old", tasks["old"]), ("old-again", tasks["old-again"])):
        assert _masked(files[name], task) == _masked(files["new"], tasks["new"]), name
    assert files["old-again"] == read_files(tmp_path / "old")  # as the run wrote them


def _masked(files: dict[str, bytes], task: str) -> dict[str, bytes]:
    from tests.test_store_backends import _mask

    return {name: _mask(data, task) for name, data in files.items()}


# -- the encoders built once -----------------------------------------------------------------


class Colour(enum.StrEnum):  # result dumps hold StrEnum values (statuses, sources)
    RED = "RED"
    BLUE = "蓝"


_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x1f\u2028\U0001f600é中'))
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 1e-05, 1e16, 5e-324, 1.7976931348623157e308, 0.1])
    | _TEXT
    | st.sampled_from(list(Colour))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_TEXT, inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_the_encoders_built_once_write_what_json_writes(value: Any) -> None:
    """Every column written through ``_one_shot`` is the text ``JSONEncoder.encode`` gives
    (the result's ``json.dumps`` spelling, the other columns' canonical text): same key order,
    floats (``NaN``, ``-0.0``, ``1e-05``), big integers, enums, tuples and non-ASCII."""
    for encoder in (_RESULT_ENCODER, _ROW_ENCODER):
        assert _one_shot(encoder)(value) == encoder.encode(value)


def test_the_encoders_built_once_refuse_what_json_refuses() -> None:
    for encoder in (_RESULT_ENCODER, _ROW_ENCODER):
        encode = _one_shot(encoder)
        with pytest.raises(TypeError, match="not JSON serializable"):
            encode({"a": {1, 2}})
        with pytest.raises(TypeError, match="keys must be str"):
            encode({("a",): 1})
        assert encode({"nan": math.nan}) == encoder.encode({"nan": math.nan})
        assert json.loads(encode({"k": [1.5, "中"]})) == {"k": [1.5, "中"]}


def test_an_encoder_the_c_code_cannot_be_built_for_is_used_as_it_is() -> None:
    """A cycle-checking or indenting encoder is not rebuilt: its own ``encode`` is returned."""
    checking = json.JSONEncoder()
    indenting = json.JSONEncoder(indent=2, check_circular=False)
    assert _one_shot(checking) == checking.encode
    assert _one_shot(indenting) == indenting.encode


# -- the referenceBasis texts by identity ----------------------------------------------------


def test_result_text_is_the_same_through_the_identity_cache_and_when_it_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Entries shared across rows (the normalizer's) are found by identity; entries made for
    one row each fill the cache, which is cleared when full and stays bounded; every result
    is still the bytes of ``json.dumps`` of its JSON dict."""
    import rubric_engine.store.task_store as store
    from rubric_engine.results.model import BasisEntry, RequirementStatus, RowResult, RowStatus

    monkeypatch.setattr(store, "_BASIS_CACHE_MAX", 8)
    monkeypatch.setattr(store, "_BASIS_BY_ID", {})
    monkeypatch.setattr(store, "_BASIS_TEXT", {})
    shared = tuple(
        BasisEntry(requirement_id=f"R{i}", status=RequirementStatus.FOLLOWED, source="default")
        for i in range(5)
    )

    def fresh(n: int) -> tuple[BasisEntry, ...]:  # freed after each row: ids come again
        return tuple(
            BasisEntry(
                requirement_id=f"F{n}-{i} “中”",
                status=RequirementStatus.VIOLATED,
                source="judge",
                evidence_turns=(n, n + i),
            )
            for i in range(3)
        )

    def written(basis: tuple[BasisEntry, ...]) -> bool:
        result = RowResult(row_id="r", status=RowStatus.SCORED, reference_basis=basis)
        return store.result_json(result) == json.dumps(result.to_json_dict(), ensure_ascii=False)

    for n in range(40):
        assert written(shared)
        assert written(fresh(n) + shared[:2])
        assert written(shared[3:] + fresh(n + 100))
        assert len(store._BASIS_BY_ID) <= 8 + 3 + len(shared)


def test_a_stored_dialogue_is_the_json_mode_dump_of_its_row() -> None:
    """``pipeline.stored_row`` dumps the row through pydantic's serializer directly: the
    dump ``model_dump(mode="json", by_alias=True)`` gives, for both demos' rows (tool calls,
    traces, metadata)."""
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import _DUMP
    from tests.conftest import CASES

    rows = [row for cases, _ in DEMOS for row in DialogueSource(CASES / cases).read()]
    assert len(rows) == 51 and any(m.tool_calls for row in rows for m in row.messages)
    for row in rows:
        assert _DUMP(row, mode="json", by_alias=True) == row.model_dump(mode="json", by_alias=True)
