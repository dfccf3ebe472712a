"""The rowIds a report lists, read when they are written (a report lists every low row).

``report.json`` lists every low row's id under its issue cluster and every red-flagged row's id
under its flag, so those lists grow with the task. A :class:`RowIds` is such a list as a count
and a way to read it: the streaming report reads its lists from the temporary database its
listed rows went to (:class:`~rubric_engine.report.clusters.ListedRows`), so a report of a
million rows holds no id in memory. :func:`json_chunks` writes a report holding such lists in
the text ``json.dumps(value, ensure_ascii=False, indent=2)`` gives for plain lists, a few
thousand ids per chunk, without building the list of ``str``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

#: ids per chunk when a list is written as JSON
_CHUNK_IDS = 2048
_encode_str = json.encoder.encode_basestring  # ensure_ascii=False's string encoder


class RowIds(Sequence[str]):
    """An immutable list of rowIds (a report's ``rowIds``): ``count`` ids, read in order by
    ``read()`` each time the list is iterated.

    Reads as a ``tuple[str, ...]`` does: ``len``, iteration, an index (a ``str``) or a slice
    (a ``tuple``; ``ids[:5]`` reads five), ``==`` with another :class:`RowIds` or a tuple of
    the same ids, and the same hash as that tuple. As a pydantic field it accepts a
    :class:`RowIds` or any list or tuple of strings and dumps as a tuple (a list in JSON mode),
    so ``to_json_dict`` and ``model_validate`` of a report work as they did with tuples.
    """

    __slots__ = ("_count", "_read")

    def __init__(self, count: int, read: Callable[[], Iterator[str]]) -> None:
        self._count = count
        self._read = read

    @classmethod
    def of(cls, ids: Iterable[str]) -> RowIds:
        """A list holding ``ids`` in memory."""
        held = tuple(ids)
        return cls(len(held), lambda: iter(held))

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step < 0:
                return tuple(self)[i]
            return tuple(islice(self, start, stop, step))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("RowIds index out of range")
        return next(islice(self, i, None))

    def __iter__(self) -> Iterator[str]:
        return self._read()

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


__all__ = ["RowIds", "json_chunks"]
