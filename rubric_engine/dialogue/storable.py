"""Is a row's data storable? Checked at input validation, before any judge call (docs/inputs.md).

A row is stored as JSON (the task store keeps the dialogue beside its result) and shown in
reports. These kinds of value pass JSON decoding and pydantic but fail later, after the judge
call was paid for: nesting deeper than the serializer allows (pydantic stops at about
255 levels; Python's JSON decoder raises RecursionError at about a thousand), numbers that are
not JSON (``NaN``, ``Infinity``: Python's decoder accepts them, strict JSON readers and
PostgreSQL's ``jsonb`` do not), integers too long to write (YAML reads ``0xfff…`` of any
length), and text that is not UTF-8 (a lone surrogate such as ``"\\ud800"`` decodes but cannot
be written to SQLite). :func:`storable_problem` finds the first of them with its field path,
without recursion, so any depth is measured safely.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from rubric_engine.errors import format_loc

#: deepest nesting of objects/lists accepted in one row (the shipped data needs fewer than 15)
MAX_ROW_DEPTH = 100


def storable_problem(value: Any) -> tuple[str, str] | None:
    """The first value in ``value`` that cannot be stored as JSON, or ``None``.

    Args:
        value: decoded JSON or YAML (dicts, lists, tuples, strings, numbers, booleans,
            ``None``, dates).

    Returns:
        ``(field path, message with the fix)`` for the first problem in depth-first order:
        nesting deeper than :data:`MAX_ROW_DEPTH`, a non-finite number, a string (or key) that
        is not valid Unicode text, binary data (YAML ``!!binary``) that is not UTF-8;
        ``None`` when everything is storable. Dates, and keys that are numbers or dates (YAML),
        pass: the store writes them as text.
    """
    if _storable_keys(value, 0) >= 0:  # the common case, without a field path per value
        return None
    return _first_problem(value)


def _first_problem(value: Any) -> tuple[str, str] | None:
    """:func:`storable_problem`'s walk, with a field path per value."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_ROW_DEPTH:
            return (
                format_loc(path[:3]) + f"… ({MAX_ROW_DEPTH} levels down)",
                f"nested more than {MAX_ROW_DEPTH} levels deep; flatten it (store it as a "
                "JSON string, or keep only the fields the evaluation needs)",
            )
        if isinstance(item, dict):
            for key, child in reversed(item.items()):
                # YAML keys may be numbers or dates: the store writes those as their text
                if isinstance(key, str) and not _is_text(key):
                    return format_loc(path), f"key {key!r} is not valid Unicode text"
                stack.append((child, (*path, str(key))))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, float) and not math.isfinite(item):
            return (
                format_loc(path),
                f'{item} is not a JSON number; write null or a string such as "{item}"',
            )
        elif isinstance(item, int) and not isinstance(item, bool) and not _storable(item, 0):
            return (
                format_loc(path),
                f"an integer of more than {sys.get_int_max_str_digits()} digits cannot be "
                "written; store it as a string or shorten it",
            )
        elif isinstance(item, bytes) and not _is_utf8(item):  # YAML !!binary
            return format_loc(path), "binary data that is not UTF-8 text cannot be stored"
        elif isinstance(item, str) and not _is_text(item):
            return (
                format_loc(path),
                "holds a lone surrogate (such as \\ud800), which is not Unicode text; fix the "
                "encoding of the source",
            )
    return None


def _storable(item: Any, depth: int) -> bool:
    """Whether :func:`storable_problem` finds nothing, answered without field paths
    (:func:`_storable_keys`)."""
    return _storable_keys(item, depth) >= 0


def _storable_keys(item: Any, depth: int) -> int:
    """How many keys the objects (mappings) in ``item`` have, every level added up, when
    :func:`storable_problem` finds nothing in it; ``-1`` for a problem (the recursion stops
    one level past :data:`MAX_ROW_DEPTH`, far inside Python's limit).

    Plain loops, strings first: this runs over every value of every input row before the
    first judge call (a generator per container cost half its time). Leaves are
    told by their exact type first (``str``, ``int``, ``None``, ``bool``: decoded JSON),
    without a call; anything else takes the general path."""
    if depth > MAX_ROW_DEPTH:
        return -1
    kind = type(item)
    if kind is str:
        return 0 if item.isascii() or _is_text(item) else -1
    if kind is dict or (kind is not list and isinstance(item, dict)):
        if depth == MAX_ROW_DEPTH:
            # its children would be one level too deep, whatever they are
            return -1 if item else 0
        keys = len(item)
        for key, child in item.items():
            if isinstance(key, str) and not key.isascii() and not _is_text(key):
                return -1
            leaf = type(child)
            if leaf is str:  # the common leaf, without a call
                if not (child.isascii() or _is_text(child)):
                    return -1
            elif leaf is int:
                if not (child.bit_length() < _LONG_INT_BITS or _writable_int(child)):
                    return -1
            elif leaf is not bool and child is not None:
                inner = _storable_keys(child, depth + 1)
                if inner < 0:
                    return -1
                keys += inner
        return keys
    if kind is list or isinstance(item, list | tuple):
        if depth == MAX_ROW_DEPTH:
            return -1 if item else 0
        keys = 0
        for child in item:
            leaf = type(child)
            if leaf is str:
                if not (child.isascii() or _is_text(child)):
                    return -1
            elif leaf is int:
                if not (child.bit_length() < _LONG_INT_BITS or _writable_int(child)):
                    return -1
            elif leaf is not bool and child is not None:
                inner = _storable_keys(child, depth + 1)
                if inner < 0:
                    return -1
                keys += inner
        return keys
    if isinstance(item, str):  # a str subclass
        ok = item.isascii() or _is_text(item)
    elif isinstance(item, float):
        ok = math.isfinite(item)
    elif isinstance(item, bytes):
        ok = _is_utf8(item)
    elif isinstance(item, int) and not isinstance(item, bool):
        ok = item.bit_length() < _LONG_INT_BITS or _writable_int(item)
    else:
        ok = True
    return 0 if ok else -1


#: integers of fewer bits have fewer than 4,000 digits: always writable, without the test
_LONG_INT_BITS = 13_000


def _writable_int(number: int) -> bool:
    """Whether Python will write ``number`` as digits (YAML reads ``0xfff…`` of any length;
    ``str`` refuses more than ``sys.get_int_max_str_digits()`` digits)."""
    try:
        str(number)
    except ValueError:
        return False
    return True


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
