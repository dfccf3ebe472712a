"""CSV dialogue files (docs/inputs.md: "CSV with quoted multi-line fields accepted").

A header row and one record per dialogue: ``rowId`` (optional), and either ``messages`` (a JSON
array) or a user and an assistant column (aliases below); ``expected``, ``trace`` and ``metadata``
columns are JSON (``metadata`` a JSON object, merged with the metadata the other columns give);
other columns become metadata. Quoting is RFC 4180's, read strictly: an unbalanced quote is
an error naming the line where the quoted field opened, never a silent merge of the rest of the
file into one field. Line breaks inside fields are ``\\n`` whatever the file was saved with.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rubric_engine.dialogue.shapes import RowShapeError
from rubric_engine.formats import jsonl
from rubric_engine.formats.jsonl import json_problem

_CSV_USER = ("user", "query", "question", "input", "prompt")
_CSV_ASSISTANT = ("assistant", "answer", "response", "output", "completion")
#: columns whose cells are JSON text, as in a JSONL row's field of the same name
_JSON_COLUMNS = ("expected", "trace", "metadata")
_JSON_HINT = {
    "expected": "; write the rule checks as a JSON array, quotes doubled inside the quoted cell",
    "trace": "; write the trace as a JSON object, quotes doubled inside the quoted cell",
    "metadata": (
        '; write it as a JSON object such as "{""scenario"": ""triage""}" (quotes doubled '
        "inside the quoted cell), or give each metadata field a column of its own: columns "
        "other than rowId, messages, user/assistant, expected and trace become metadata"
    ),
}


def repeated_columns(header: Sequence[str]) -> str | None:
    """What is wrong with a CSV header naming a column twice (``csv.DictReader`` would keep
    the last column of a name silently), or ``None``. Shared by the label reader."""
    repeated = sorted({name for name in header if header.count(name) > 1})
    if not repeated:
        return None
    names = ", ".join(repr(n) for n in repeated)
    return f"the header names column {names} twice; name each column once"


#: the longest CSV field read (characters): past any row's text limit (``MAX_ROW_CHARS``),
#: within a C long everywhere
_FIELD_LIMIT = 2**31 - 1


def allow_long_fields() -> None:
    """Let the csv module read fields of any length (up to :data:`_FIELD_LIMIT`): it refuses
    one over 131,072 characters ("field larger than field limit"), where a JSONL twin's field
    is read. The readers' own checks speak for length (a row's text, the judge's context).
    The limit is the module's, process-wide; it is only ever raised."""
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)


def csv_objects(path: Path, stem: str) -> Iterator[tuple[str, Any, str]]:
    """Yield ``(where, row object or RowShapeError, default id)`` per CSV record, in order.

    A record the csv module cannot split ends the file (nothing after it can be trusted).

    ``strict`` makes the csv module refuse what it would otherwise guess at: an unbalanced
    quote swallowed every later line into one field and was judged as one row. The error
    names the line where the offending quoted field opened (:func:`_open_quote_line`).
    Line breaks inside fields become ``\\n`` (:func:`_csv_text`).
    """
    allow_long_fields()
    with path.open(encoding="utf-8-sig", newline="") as handle:
        read = [0]  # lines handed to the csv module (its own line_num lags after an error)

        def lines() -> Iterator[str]:
            for line in handle:
                read[0] += 1
                yield line

        reader = csv.DictReader(lines(), strict=True)
        try:
            header = reader.fieldnames or []
        except csv.Error:
            header = []  # the first record's own error is reported below
        twice = repeated_columns(header)
        if twice:
            yield f"{path}:1", RowShapeError("", twice), stem
            return
        while True:
            started = read[0] + 1  # the record about to be read starts here
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                quote, still_open = _open_quote_line(path, started, read[0])
                yield (
                    f"{path}:{quote or started}",
                    RowShapeError(
                        "",
                        "not valid CSV: "
                        f"{_csv_problem(exc, quote, still_open, read[0])}; "
                        'a quote inside a quoted field is written twice (""), and every '
                        "quoted field needs its closing quote. Nothing after this line "
                        "was read",
                    ),
                    stem,
                )
                return
            where = f"{path}:{reader.line_num}"  # the record's last line, as before
            try:
                yield where, _csv_object(_csv_text(record)), f"{stem}-{reader.line_num}"
            except RowShapeError as exc:
                yield where, exc, stem


def _csv_object(record: dict[str, str]) -> dict[str, Any]:
    short = [k for k, v in record.items() if k is not None and v is None]
    if short:
        raise RowShapeError(
            "",
            f"the row has fewer fields than the header (no value for {', '.join(short)}); "
            "quote fields that contain commas or line breaks",
        )
    if None in record:
        raise RowShapeError(
            "", "the row has more fields than the header; quote fields that contain commas"
        )
    obj: dict[str, Any] = {k: v for k, v in record.items() if k is not None}
    for key in _JSON_COLUMNS:  # JSON columns: rule checks, the run's trace, metadata
        if isinstance(obj.get(key), str) and obj[key].strip():
            try:
                obj[key] = jsonl.loads(obj[key])
            except json.JSONDecodeError as exc:
                raise RowShapeError(
                    key, f"the {key} column is not JSON ({json_problem(exc)}){_JSON_HINT[key]}"
                ) from exc
        elif obj.get(key) == "":
            obj.pop(key)
    if "metadata" in obj and not isinstance(obj["metadata"], dict):
        kind = type(obj["metadata"]).__name__
        hint = _JSON_HINT["metadata"]
        raise RowShapeError(
            "metadata", f"the metadata column holds JSON {kind}, not an object{hint}"
        )
    if obj.get("messages"):
        try:
            obj["messages"] = jsonl.loads(obj["messages"])
        except json.JSONDecodeError as exc:
            raise RowShapeError(
                "messages", f"the messages column is not a JSON array ({exc.msg})"
            ) from exc
        return obj
    user = next((c for c in _CSV_USER if obj.get(c)), None)
    assistant = next((c for c in _CSV_ASSISTANT if obj.get(c)), None)
    if assistant is None:
        present = [c for c in _CSV_ASSISTANT if c in obj]
        if present:
            raise RowShapeError(
                present[0], f"the `{present[0]}` column is empty on this row: nothing to judge"
            )
        raise RowShapeError(
            "",
            "a CSV row needs a `messages` column (JSON) or an `assistant` "
            f"column (or one of {', '.join(_CSV_ASSISTANT)}) plus a `user` "
            "column",
        )
    messages = [{"role": "user", "content": obj.pop(user)}] if user else []
    messages.append({"role": "assistant", "content": obj.pop(assistant)})
    obj["messages"] = messages
    return obj


def _csv_text(record: dict[str, Any]) -> dict[str, Any]:
    """Field values with ``\\r\\n`` and lone ``\\r`` line breaks as ``\\n``: a file saved on
    Windows keeps CRLF inside quoted fields, and the same dialogue as JSONL has ``\\n``, so
    without this the two sent different requests (and missed each other's cassettes)."""
    return {
        k: v.replace("\r\n", "\n").replace("\r", "\n") if isinstance(v, str) else v
        for k, v in record.items()
    }


def _open_quote_line(path: Path, start: int, stop: int) -> tuple[int | None, bool]:
    """Where the last quoted field opened between lines ``start`` and ``stop`` (1-based,
    inclusive), under RFC 4180 quoting (a quote opens a field only at its start; ``""`` is a
    quote inside one).

    Returns:
        ``(line, still_open)``: the line of the last quoted field that opened (``None`` when
        none did) and whether it is still open after line ``stop``.
    """
    opened: int | None = None
    inside, field_start = False, True
    with path.open(encoding="utf-8-sig", newline="") as handle:
        for n, line in enumerate(handle, start=1):
            if n < start:
                continue
            if n > stop:
                break
            i = 0
            while i < len(line):
                char = line[i]
                if inside:
                    if char == '"' and line[i + 1 : i + 2] == '"':
                        i += 1
                    elif char == '"':
                        inside, field_start = False, False
                elif char == '"' and field_start:
                    inside, opened = True, n
                else:
                    field_start = char in ",\r\n"
                i += 1
    return opened, inside


def _csv_problem(exc: csv.Error, quote_line: int | None, still_open: bool, line: int) -> str:
    """The csv module's complaint in a reader's words."""
    if still_open and quote_line is not None:
        return (
            f"the quoted field that starts on line {quote_line} is never closed (the file "
            "ends inside it)"
        )
    opened = f"; the quoted field opened on line {quote_line}" if quote_line else ""
    return f"{exc} (line {line}{opened})"
