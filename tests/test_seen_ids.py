"""SeenIds answers as the ``dict[str, str]`` of rowId → place it replaced (issue 18), with
far less memory an id."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from rubric_engine.dialogue import seen_ids
from rubric_engine.dialogue.readers import GENERATED
from rubric_engine.dialogue.seen_ids import SeenIds

PLACES = [
    "data/a.jsonl:{}",
    "data/b.json: [{}]",
    "rows[{}]",
    "x.json: resourceSpans[0].scopeSpans[1].spans[{}]",
    "c{{}}.csv:{}",  # braces in a path are kept as they are
]


def _random_id(rnd: random.Random) -> str:
    kind = rnd.randrange(4)
    if kind == 0:
        return f"row-{rnd.randrange(3000)}"
    if kind == 1:
        return "".join(rnd.choice("ab") for _ in range(rnd.randrange(1, 9)))
    if kind == 2:
        return rnd.choice(["", "é", "日本", "\ud800", "a\x00b", "007"]) + str(rnd.randrange(50))
    return str(rnd.randrange(10**6))


def _random_place(rnd: random.Random) -> str:
    kind = rnd.randrange(5)
    if kind == 0:
        return "only/a/path.json"  # no number in it
    if kind == 1:
        return f"a.jsonl:0{rnd.randrange(1, 9)}"  # a leading zero is kept
    if kind == 2:
        return f"big.jsonl:{rnd.randrange(2**40)}"  # too big to pack: kept whole
    return rnd.choice(PLACES).format(rnd.randrange(10**5))


def _same_as_a_dict(flush_every: int, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    seen = SeenIds(flush_every=flush_every)
    plain: dict[str, tuple[str, bool]] = {}
    for _ in range(n):
        row_id = _random_id(rnd)
        assert (row_id in seen) == (row_id in plain)
        assert seen.first(row_id) == plain.get(row_id)
        if row_id not in plain:
            where, generated = _random_place(rnd), rnd.random() < 0.3
            seen.add(row_id, where, generated)
            plain[row_id] = (where, generated)
    assert len(seen) == len(plain)
    for row_id, first in plain.items():  # every id found again, after every merge
        assert row_id in seen and seen.first(row_id) == first
    for _ in range(500):
        other = _random_id(rnd) + "-not-taken"
        assert other not in seen and seen.first(other) is None


@pytest.mark.parametrize("flush_every", [1, 3, 64, 4096])
def test_it_answers_as_the_dict_did(flush_every: int) -> None:
    _same_as_a_dict(flush_every, 4000, seed=flush_every)


def test_a_hash_collision_is_never_a_duplicate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen_ids, "_hash32", lambda row_id: len(row_id) % 3)
    _same_as_a_dict(flush_every=7, n=2000, seed=18)


def test_ids_are_found_across_the_merge_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen_ids, "_hash32", lambda row_id: 5)  # every id collides
    seen = SeenIds(flush_every=4)
    for i in range(9):  # two flushed runs merged into one, then one more id in the dict
        seen.add(f"id-{i}", f"f.jsonl:{i + 1}", i % 2 == 0)
        assert [seen.first(f"id-{j}") for j in range(i + 1)] == [
            (f"f.jsonl:{j + 1}", j % 2 == 0) for j in range(i + 1)
        ]
    assert len(seen._runs) == 1 and len(seen._runs[0]) == 8 and len(seen._newest) == 1
    assert "id-9" not in seen and "id-" not in seen and 5 not in seen


def test_the_readers_still_take_a_plain_dict() -> None:
    from rubric_engine.dialogue.readers import MemorySource

    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "o"}]}
    seen: dict[str, str] = {"x": "a.jsonl:3"}
    MemorySource([{"rowId": "y", **row}, row]).read(seen)
    assert seen == {"x": "a.jsonl:3", "y": "rows[0]", "row-2": "rows[1]" + GENERATED}


def test_50k_ids_take_under_60_bytes_each() -> None:
    ids = [f"row-{i:06d}" for i in range(50_000)]  # made before: the rows own their ids
    places = [f"data/dialogues.jsonl:{i + 1}" for i in range(50_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        seen = SeenIds()
        for row_id, where in zip(ids, places, strict=True):
            seen.add(row_id, where)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(seen) == 50_000 and seen.first("row-012345") == ("data/dialogues.jsonl:12346", False)
    print(f"SeenIds: {held / 50_000:.1f} B an id (10-byte ids)")
    assert held / 50_000 < 60
