"""Where a streaming report keeps what it needs of every row (docs/scale.md).

A report must add some floats in input order or rank them (latencies for the exact p95, costs,
agent durations: :class:`Floats`) and list the rowIds of its low and red-flagged rows
(:class:`Listed`). Both grow with the task, so where they are kept is the caller's choice
(:class:`Storage`): in memory by default (:class:`InMemory`; a report built from a list of
rows holds the rows anyway), or in a private temporary database for a report streamed from a
store (:class:`rubric_engine.report.scratch_tables.ScratchTables`), so that its memory does not
grow with the rows. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Literal, Protocol

#: a listed row's group when it is not a low row (a flagged CHECKED row)
NOT_LOW = 0


class Floats(Protocol):
    """Floats of some rows by the row's ``seq`` (unique)."""

    def __len__(self) -> int: ...

    def add(self, seq: int, value: float) -> None: ...

    def in_order(self) -> Iterator[float]:
        """The values in seq (input) order."""
        ...

    def at_rank(self, index: int) -> float:
        """The value at ``index`` of the ascending order (``0 <= index < len``)."""
        ...


class Listed(Protocol):
    """The rows a report lists: ``(seq, rowId, group, flag set)``, seq unique."""

    def add(self, seq: int, row_id: str, group: int, flag_set: int) -> None: ...

    def read(
        self, column: Literal["group", "flag_set"], values: Collection[int]
    ) -> Iterator[tuple[str, int]]:
        """``(rowId, flag set)`` of the rows whose ``column`` is one of ``values``, in listing
        order: the rows of the low groups in seq order, then those of :data:`NOT_LOW` in seq
        order."""
        ...


class Storage(Protocol):
    """Makes the :class:`Floats` (one per name) and the :class:`Listed` of one report."""

    def floats(self, name: str) -> Floats: ...

    def listed(self) -> Listed: ...


class MemoryFloats:
    """:class:`Floats` in a dict."""

    def __init__(self) -> None:
        self._values: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self._values)

    def add(self, seq: int, value: float) -> None:
        self._values[seq] = value

    def in_order(self) -> Iterator[float]:
        return (self._values[seq] for seq in sorted(self._values))

    def at_rank(self, index: int) -> float:
        return sorted(self._values.values())[index]


class MemoryListed:
    """:class:`Listed` in a list."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, str, int, int]] = []

    def add(self, seq: int, row_id: str, group: int, flag_set: int) -> None:
        self._rows.append((seq, row_id, group, flag_set))

    def read(
        self, column: Literal["group", "flag_set"], values: Collection[int]
    ) -> Iterator[tuple[str, int]]:
        at = 2 if column == "group" else 3
        wanted = set(values)
        found = sorted(
            (r for r in self._rows if r[at] in wanted), key=lambda r: (r[2] == NOT_LOW, r[0])
        )
        return ((row_id, flag_set) for _, row_id, _, flag_set in found)


class InMemory:
    """:class:`Storage` in memory."""

    def floats(self, name: str) -> Floats:
        return MemoryFloats()

    def listed(self) -> Listed:
        return MemoryListed()


__all__ = ["NOT_LOW", "Floats", "InMemory", "Listed", "MemoryFloats", "MemoryListed", "Storage"]
