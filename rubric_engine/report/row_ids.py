"""The rowIds a report lists, held without a Python ``str`` per id (a report lists every low row).

``report.json`` lists every low row's id under its issue cluster and every red-flagged row's id
under its flag, so those lists grow with the task. A ``tuple[str, ...]`` of them costs ~60 B an
id (the ``str`` object and its slot); here an id costs its UTF-8 bytes and a 4-byte end offset
while the report is built (:class:`CompactStrings`), and 4 bytes more in each list that names it
(:class:`RowIds`, a view by position into those strings, so the report shares the bytes the
streaming accumulator already holds). :func:`json_chunks` writes a report holding such lists
in the text ``json.dumps(value, ensure_ascii=False, indent=2)`` gives for plain lists, a few
thousand ids per chunk, without building the list of ``str``.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

#: ids per chunk when a list is written as JSON
_CHUNK_IDS = 2048
_encode_str = json.encoder.encode_basestring  # ensure_ascii=False's string encoder


#: the next wider item size of an integer array (signed and unsigned)
_WIDER = {"B": "H", "H": "I", "I": "q", "b": "h", "h": "i", "i": "q", "l": "q", "L": "q"}


def append_int(values: array[int], value: int) -> array[int]:
    """``values`` with ``value`` appended, copied to the next wider item size (``B`` → ``H``
    → ``I`` → ``q``; ``b`` → ``h`` → ``i`` → ``q``) each time a value does not fit, so an
    array of small numbers keeps 1-byte items until a larger one comes; returns the array to
    keep (the same one unless it was widened).

    Raises:
        OverflowError: ``value`` does not fit 8 signed bytes.
    """
    try:
        values.append(value)
    except OverflowError:
        while values.typecode in _WIDER:
            values = array(_WIDER[values.typecode], values)
            try:
                values.append(value)
            except OverflowError:
                continue
            return values
        raise
    return values


class CompactStrings:
    """Strings appended one by one and read back by position: one UTF-8 buffer and each
    string's end offset, so a string costs its bytes + 4 (8 past 4 GiB of text).

    Lone surrogates (a JSON ``"\\ud800"`` escape) are kept as they came (``surrogatepass``).
    Strings are never changed or removed, so a :class:`RowIds` view stays valid while more
    are appended.
    """

    __slots__ = ("_data", "_ends")

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("I")

    def __len__(self) -> int:
        return len(self._ends)

    def append(self, value: str) -> int:
        """Add ``value``; returns its position."""
        self._data += value.encode("utf-8", "surrogatepass")
        self._ends = append_int(self._ends, len(self._data))
        return len(self._ends) - 1

    def __getitem__(self, i: int) -> str:
        ends = self._ends
        start = ends[i - 1] if i > 0 else 0
        return self._data[start : ends[i]].decode("utf-8", "surrogatepass")

    @property
    def nbytes(self) -> int:
        """Bytes held (text and offsets), for memory accounting in tests and notes."""
        return len(self._data) + self._ends.itemsize * len(self._ends)


class RowIds(Sequence[str]):
    """An immutable list of rowIds (a report's ``rowIds``): the strings of a
    :class:`CompactStrings` at ``positions`` (all of them, in order, when ``None``).

    Reads as a ``tuple[str, ...]`` does: ``len``, iteration, an index (a ``str``) or a slice
    (a ``tuple``), ``==`` with another :class:`RowIds` or a tuple of the same ids, and the
    same hash as that tuple. As a pydantic field it accepts a :class:`RowIds` or any list or
    tuple of strings and dumps as a tuple (a list in JSON mode), so ``to_json_dict`` and
    ``model_validate`` of a report work as they did with tuples.
    """

    __slots__ = ("_positions", "_strings")

    def __init__(self, strings: CompactStrings, positions: array[int] | None = None) -> None:
        self._strings = strings
        self._positions = positions

    @classmethod
    def of(cls, ids: Iterable[str]) -> RowIds:
        """A list of its own holding ``ids``."""
        strings = CompactStrings()
        for row_id in ids:
            strings.append(row_id)
        return cls(strings)

    def __len__(self) -> int:
        return len(self._strings) if self._positions is None else len(self._positions)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("RowIds index out of range")
        return self._strings[i if self._positions is None else self._positions[i]]

    def __iter__(self) -> Iterator[str]:
        strings = self._strings
        positions = range(len(strings)) if self._positions is None else self._positions
        return map(strings.__getitem__, positions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RowIds | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        shown = ", ".join(repr(row_id) for row_id in islice(self, 5))
        more = f", … {len(self) - 5} more" if len(self) > 5 else ""
        return f"RowIds([{shown}{more}])"

    def json_chunks(self, level: int, indent: str = "  ") -> Iterator[str]:
        """This list as ``json.dumps(list(self), ensure_ascii=False, indent=...)`` writes it
        at nesting ``level`` (its closing bracket indented ``level`` times)."""
        if not len(self):
            yield "[]"
            return
        inner = "\n" + indent * (level + 1)
        separator = "," + inner
        ids = iter(self)
        start = "[" + inner
        while batch := list(islice(ids, _CHUNK_IDS)):
            yield start + separator.join(map(_encode_str, batch))
            start = separator
        yield "\n" + indent * level + "]"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validated,
            serialization=core_schema.plain_serializer_function_ser_schema(_dumped, info_arg=True),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "array", "items": {"type": "string"}}


def _validated(value: Any) -> RowIds:
    if isinstance(value, RowIds):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return RowIds.of(value)
    raise ValueError("rowIds must be a list of strings")


def _dumped(value: RowIds, info: core_schema.SerializationInfo) -> list[str] | tuple[str, ...]:
    return list(value) if info.mode_is_json() else tuple(value)


def json_chunks(value: Any, indent: str = "  ", level: int = 0) -> Iterator[str]:
    """``json.dumps(value, ensure_ascii=False, indent=len(indent))``'s text in chunks, with
    each :class:`RowIds` written as the list it reads as (:meth:`RowIds.json_chunks`).

    ``value`` is what ``json.dumps`` takes (dicts, lists, tuples, str, int, float, bool,
    ``None``) plus :class:`RowIds`; keys are written as ``json.dumps`` writes them.

    Raises:
        TypeError: a value or key ``json.dumps`` would refuse.
    """
    if isinstance(value, RowIds):
        yield from value.json_chunks(level, indent)
    elif isinstance(value, dict):
        if not value:
            yield "{}"
            return
        inner = "\n" + indent * (level + 1)
        start = "{" + inner
        for key, item in value.items():
            yield start + _encode_str(_key(key)) + ": "
            yield from json_chunks(item, indent, level + 1)
            start = "," + inner
        yield "\n" + indent * level + "}"
    elif isinstance(value, list | tuple):
        if not value:
            yield "[]"
            return
        inner = "\n" + indent * (level + 1)
        start = "[" + inner
        for item in value:
            yield start
            yield from json_chunks(item, indent, level + 1)
            start = "," + inner
        yield "\n" + indent * level + "]"
    else:
        yield json.dumps(value, ensure_ascii=False)


def _key(key: Any) -> str:
    """A dict key as ``json.dumps`` spells it (str as is; numbers, booleans and ``None`` as
    their JSON text)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def positions_in(values: Sequence[int]) -> array[int]:
    """Positions ``0 .. len(values) - 1`` ordered by their value (unique ints ``>= 0``):
    ``sorted(range(n), key=values.__getitem__)`` as an ``array``, by one slot per value
    instead of a list of ints (4 bytes per value up to the largest, then 4 per position)."""
    if not values:
        return array("I")
    if all(a < b for a, b in zip(values, islice(values, 1, None), strict=False)):
        return array("I", range(len(values)))
    slots = array("i", [-1]) * (max(values) + 1)
    for position, value in enumerate(values):
        slots[value] = position
    return array("I", (p for p in slots if p >= 0))


__all__ = ["CompactStrings", "RowIds", "append_int", "json_chunks", "positions_in"]
