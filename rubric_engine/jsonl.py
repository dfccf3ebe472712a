"""Reading JSON Lines files with ``file:line`` in every error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rubric_engine.errors import RubricEvalError


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (``json`` would silently keep the last value)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    unique = dict(pairs)
    if len(unique) == len(pairs):  # the common case, without a Python loop over the keys
        return unique
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
        json.JSONDecodeError: not valid JSON.
        DuplicateKeyError: an object names a key twice (the message names the key).
    """
    if not isinstance(text, str) or text.startswith("\ufeff"):
        return json.loads(text, object_pairs_hook=_unique_keys)  # its bytes and BOM handling
    return _STRICT.decode(text)  # what json.loads does with a str, without a new decoder


#: the decoder :func:`json.loads` would build for every line, built once
_STRICT = json.JSONDecoder(object_pairs_hook=_unique_keys)


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
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                message = f"{path}:{n}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"
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
                if problems is None:
                    raise error(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
                problems.append(f"{path}:{n}: not valid JSON ({exc.msg})")
