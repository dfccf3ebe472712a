"""SeenIds answers as a ``dict`` of rowId → (place, generated) would: any id (empty, NUL,
half a UTF-16 pair), any place, the first place kept when an id is claimed again."""

from __future__ import annotations

import random
import tracemalloc

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


def test_it_answers_as_a_dict_does() -> None:
    rnd = random.Random(7)
    seen = SeenIds()
    plain: dict[str, tuple[str, bool]] = {}
    for _ in range(5000):
        row_id = _random_id(rnd)
        assert (row_id in seen) == (row_id in plain)
        where, generated = _random_place(rnd) + "\udc80", rnd.random() < 0.3
        assert seen.claim(row_id, where, generated) == plain.get(row_id)
        plain.setdefault(row_id, (where, generated))
    assert len(seen) == len(plain)
    for row_id, first in plain.items():
        assert row_id in seen and seen.first(row_id) == first
    for _ in range(500):
        other = _random_id(rnd) + "-not-taken"
        assert other not in seen and seen.first(other) is None


def test_the_readers_still_take_a_plain_dict() -> None:
    from rubric_engine.dialogue.readers import MemorySource

    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "o"}]}
    seen: dict[str, str] = {"x": "a.jsonl:3"}
    MemorySource([{"rowId": "y", **row}, row]).read(seen)
    assert seen == {"x": "a.jsonl:3", "y": "rows[0]", "row-2": "rows[1]" + GENERATED}


def test_memory_held_in_python_does_not_grow_with_the_ids() -> None:
    """The ids live in SQLite's temporary database (its page cache is bounded); what Python
    holds for 20,000 ids is what it holds for 2,000, give or take a few KB."""
    held = []
    for count in (2_000, 20_000):
        ids = [f"row-{i:06d}" for i in range(count)]  # made before: the rows own their ids
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            seen = SeenIds()
            for n, row_id in enumerate(ids):
                seen.claim(row_id, f"data/dialogues.jsonl:{n + 1}")
            held.append(tracemalloc.get_traced_memory()[0] - before)
        finally:
            tracemalloc.stop()
        assert seen.first("row-001234") == ("data/dialogues.jsonl:1235", False)
        seen.close()
    assert held[1] < held[0] + 64_000
