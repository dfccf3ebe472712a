"""rowIds that look alike: ``medgpt-1`` and ``mеdgpt-1`` (a Cyrillic ``е``) print the same in
every report, so two rows could be mistaken for one another (docs/security.md).

Two ids look alike when their *skeletons* are equal: NFKC-normalized, then each non-ASCII
character replaced by the ASCII letter it is a homoglyph of in Unicode's confusables data
(UTS #39, through the ``confusable_homoglyphs`` package). Only ids with a non-ASCII character
are examined (an all-ASCII id is its own skeleton), so an input of ASCII ids costs one
``isascii`` per row, and the package is imported only when such an id appears.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Container
from functools import cache
from typing import TypeVar

T = TypeVar("T")


@cache
def _ascii_twin(char: str) -> str:
    """The ASCII character ``char`` is a homoglyph of, or ``char`` itself."""
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin"]) or []
    for entry in found:
        for glyph in entry.get("homoglyphs") or ():
            twin = glyph.get("c") or ""
            if len(twin) == 1 and twin.isascii():
                return twin
    return char


def skeleton(row_id: str) -> str:
    """What ``row_id`` looks like, in ASCII where a homoglyph allows (see module docstring)."""
    folded = unicodedata.normalize("NFKC", row_id)
    return "".join(c if c.isascii() else _ascii_twin(c) for c in folded)


class LookalikeIds:
    """Collects the rowIds with a non-ASCII character while an input is read
    (:meth:`watch`), then names the pairs that look alike (:meth:`pairs`)."""

    def __init__(self) -> None:
        self.unusual: list[str] = []

    def watch(self, keep: Callable[[T], None], row_id: Callable[[T], str]) -> Callable[[T], None]:
        """``keep``, also noting each kept row's id when it is not all ASCII."""
        unusual = self.unusual

        def noted(row: T) -> None:
            keep(row)
            rid = row_id(row)
            if not rid.isascii():
                unusual.append(rid)

        return noted

    def pairs(self, seen: Container[str]) -> list[tuple[str, str]]:
        """``(id, lookalike)`` pairs, in reading order: an unusual id whose skeleton is another
        id of the input (``seen``), or two unusual ids with one skeleton."""
        found: list[tuple[str, str]] = []
        first: dict[str, str] = {}
        for rid in self.unusual:
            shape = skeleton(rid)
            if shape != rid and shape in seen:
                found.append((shape, rid))
            elif shape in first and first[shape] != rid:
                found.append((first[shape], rid))
            first.setdefault(shape, rid)
        return found


def describe(pair: tuple[str, str]) -> str:
    """``'a' and 'b' (U+0435 CYRILLIC SMALL LETTER IE)``: the pair and the characters that
    differ."""
    a, b = pair
    odd = dict.fromkeys(c for c in a + b if not c.isascii())
    names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in odd)
    return f"{a!r} and {b!r} ({names})"
