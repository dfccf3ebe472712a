"""Reading JSON Lines files with ``file:line`` in every error."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rubric_engine.errors import RubricEvalError


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (``json`` would silently keep the last value)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKeyError(
                f"the key {key!r} appears twice in one object; write it once (a reader would "
                "silently keep only the last value)"
            )
        seen[key] = value
    return seen


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses an object with a duplicated key (input files, not replies).

    Raises:
        json.JSONDecodeError: not valid JSON, or a number Python will not hold (see
            :func:`loads`).
        DuplicateKeyError: an object names a key twice (the message names the key).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, DuplicateKeyError):
        raise
    except ValueError as exc:  # a long number; RecursionError goes on to the caller, whose
        raise unreadable(text, exc) from None  # "too deep" names the place


def loads(text: str) -> Any:
    """``json.loads(text)``, with a number of more than ``sys.get_int_max_str_digits()``
    digits (4300 by default; Python refuses to convert it) reported as a
    :class:`json.JSONDecodeError` at that number, as any other text ``json`` cannot read,
    so that readers name the file, line and field instead of failing with a traceback; and
    nesting deeper than the recursion limit likewise.

    Raises:
        json.JSONDecodeError: as ``json.loads``, or such a number.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise unreadable(text, exc) from None


def unreadable(text: str | bytes | bytearray, exc: BaseException) -> json.JSONDecodeError:
    """The decode error of ``text``: valid JSON that Python will not hold. ``exc`` is what
    decoding raised: ``RecursionError`` (nesting past the recursion limit), or the
    ``ValueError`` of a number of more than ``sys.get_int_max_str_digits()`` digits (placed
    at that number). Shared by every reader that turns those into a JSON error."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8-sig", "replace")
    if isinstance(exc, RecursionError):
        return json.JSONDecodeError("it nests deeper than can be read", text, 0)
    limit = sys.get_int_max_str_digits()
    found = re.search(rf"[0-9]{{{limit + 1},}}", text)
    return json.JSONDecodeError(long_number_problem(), text, found.start() if found else 0)


def lone_surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (half of a UTF-16 pair, U+D800 to
    U+DFFF alone, what a ``\\ud800`` escape decodes to), or ``None``: UTF-8, and so the
    store, the reports and a request, cannot hold one. Shared by the reply reader, the
    store, the cassette writer and the label reader."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def lone_surrogate_in(value: Any) -> str | None:
    """``U+XXXX`` of the first lone surrogate among the strings of a decoded JSON ``value``
    (what a ``\\ud800`` escape decodes to; :func:`lone_surrogate_at`), or ``None``; ``None``
    too for a value JSON cannot write again (too deep, not JSON-shaped: its own reader says
    what is wrong). Shared by the reply reader and the label reader."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    at = lone_surrogate_at(text)
    return None if at is None else f"U+{ord(text[at]):04X}"


def long_number_problem() -> str:
    """What is wrong with a number too long for Python, and the fix (JSON and YAML readers)."""
    return (
        f"a number has more than {sys.get_int_max_str_digits()} digits, more than can be "
        "read; write it as a string or shorten it"
    )


def json_problem(exc: json.JSONDecodeError, unit: str = "line") -> str:
    """``json``'s complaint with its place, in a reader's words.

    Args:
        exc: the error of decoding one JSONL line, or one whole ``.json`` file.
        unit: ``"line"`` (the place is a column of that line) or ``"file"`` (line and column).

    Returns:
        e.g. ``"Expecting value at column 27: the line ends before the JSON is complete"``.
        Decoding stopped at the end of the text (an unclosed bracket, a cut-off line) is said
        so, at the column after the last character, not at the newline that ends the line;
        ``json``'s messages that end in "at" (``Unterminated string starting at``) are not
        given a second one.
    """
    doc, pos = exc.doc, exc.pos
    end = len(doc.rstrip())
    ends = pos >= end or exc.msg.startswith("Unterminated string")
    pos = min(pos, end)
    line = doc.count("\n", 0, pos) + 1
    column = pos - doc.rfind("\n", 0, pos)  # rfind is -1 on the first line: 1-based
    place = f"column {column}" if unit == "line" else f"line {line} column {column}"
    text = f"{exc.msg.removesuffix(' at')} at {place}"
    if exc.msg.startswith("Unterminated string"):
        return f"{text}: the {unit} ends before that string is closed"
    if ends and exc.msg.startswith("Invalid control character"):  # the newline ending the line
        return f"the {unit} ends inside a string at {place}; close the string with a quote"
    return f"{text}: the {unit} ends before the JSON is complete" if ends else text


def not_utf8_problem(path: Path, exc: UnicodeDecodeError) -> str:
    """``FILE:LINE: not UTF-8 text (…); save the file as UTF-8`` for ``exc``, raised while
    ``path`` was decoded whole or in chunks (the decoder's offset is inside what it was
    reading: the place is found again, :func:`first_non_utf8`). Shared by the readers of
    dialogues and of labels."""
    found = first_non_utf8(path)
    line, offset, reason = found or (None, exc.start, exc.reason)
    place = f"{path}:{line}" if line else str(path)
    return (
        f"{place}: not UTF-8 text ({reason} at byte {offset} of the file); save the file as UTF-8"
    )


def first_non_utf8(path: Path) -> tuple[int, int, str] | None:
    """Where ``path`` first stops being UTF-8 text, read line by line in binary.

    Returns:
        ``(line number, byte offset in the file, reason)`` (1-based line, 0-based offset; a
        BOM on line 1 is allowed), or ``None`` when the whole file decodes. A UTF-8 sequence
        never holds a newline byte, so decoding each line alone finds what decoding the file
        would.
    """
    offset = 0
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                return n, offset + exc.start, exc.reason
            offset += len(raw)
    return None


def read_jsonl(
    path: Path,
    error: type[RubricEvalError],
    problems: list[str] | None = None,
    torn: list[str] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, decoded value)`` for each non-blank line.

    Args:
        problems: when given, a bad line is added here and skipped instead of raising.
        torn: when given, a last line with no newline that is not valid JSON — a record a
            killed writer left half-written — is named here and skipped, never an error.

    Raises:
        error: a line is not JSON, as ``error("<path>:<line>: not valid JSON (…)")``.
    """
    offset = 0  # of the line in the file
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            offset += len(raw)
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                message = (
                    f"{path}:{n}: not UTF-8 text at byte {exc.start} of the line (byte "
                    f"{offset - len(raw) + exc.start} of the file); save the file as UTF-8"
                )
                if problems is None:
                    raise error(message) from exc
                problems.append(message)
                continue
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                if torn is not None and not line.endswith("\n"):
                    torn.append(f"{path}:{n}")
                    continue
                message = f"{path}:{n}: not valid JSON ({json_problem(exc)})"
                if problems is None:
                    raise error(message) from exc
                problems.append(message)
