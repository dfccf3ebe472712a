"""Read dialogue files into :class:`DialogueRow` s (docs/inputs.md).

Formats (``--input-format``, default ``auto``: by file suffix, then content):

* ``jsonl`` — one JSON object per line, in any row shape of
  :mod:`rubric_engine.dialogue.shapes`.
* ``json`` — a JSON array of such objects (tau-bench v1 trajectory arrays included), a
  tau2-bench results file ``{tasks, simulations}`` (see :mod:`rubric_engine.dialogue.tau`), or
  an OpenTelemetry OTLP/JSON trace export ``{resourceSpans}`` (one row per LLM-call span, see
  :mod:`rubric_engine.dialogue.otlp`; in ``jsonl``, one export per line).
* ``yaml`` (``.yaml``/``.yml``) — eval cases, one per document or a list per document.
* ``csv`` — a header row and quoted (possibly multi-line) fields: ``rowId`` (optional), and
  either ``messages`` (a JSON array) or a ``user`` and an ``assistant`` column (aliases
  ``query``/``question``/``input`` and ``answer``/``response``/``output``); ``expected``,
  ``trace`` and ``metadata`` (an object) columns are JSON; other columns become metadata.

Rows may also be eval cases in the shapes of docs/cases.md (:mod:`rubric_engine.cases`); a
diagnosis case's ``traceFixture`` is read here, relative to the input file.

A :class:`DialogueSource` validates the whole file first (every broken row reported with its
line, before any judge call) and then streams rows, so memory stays flat on large JSONL files.
"""

from __future__ import annotations

import csv
import difflib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from rubric_engine.cases.diagnosis import (
    diagnosis_fields,
    diagnosis_row,
    is_diagnosis_case,
    load_fixture,
)
from rubric_engine.cases.eval_case import eval_case_fields, is_eval_case
from rubric_engine.cases.rag_agent import is_rag_agent_row
from rubric_engine.dialogue.csv_rows import csv_objects
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.otlp import is_otlp_export, otlp_rows
from rubric_engine.dialogue.seen_ids import SeenIds
from rubric_engine.dialogue.shapes import ID_KEYS, RowShapeError, row_from_object
from rubric_engine.dialogue.storable import (
    MAX_ROW_DEPTH,
)
from rubric_engine.dialogue.tau import (
    is_taubench_trajectory,
    tau2_rows,
    taubench_domain,
    taubench_row,
)
from rubric_engine.errors import DatasetError, Problem, format_loc
from rubric_engine.formats.jsonl import (
    DuplicateKeyError,
    json_problem,
    loads_strict,
    not_utf8_problem,
)
from rubric_engine.formats.safe_yaml import (
    YamlLimitError,
    duplicate_keys,
    line_of,
    load_documents,
    yaml_problem,
)
from rubric_engine.rules.model import check_error_message, check_model, strip_tags

InputFormat = Literal["auto", "jsonl", "json", "csv", "yaml"]
#: rowIds already taken → their first place: :class:`SeenIds` (a run's), or a plain
#: ``dict[str, str]`` of id → place (ending in :data:`GENERATED` for an id made from the file
#: name), as the readers took before :class:`SeenIds`; either is updated
Seen = SeenIds | dict[str, str]
INPUT_FORMATS: tuple[str, ...] = ("auto", "jsonl", "json", "csv", "yaml")
MAX_PROBLEMS = 50
#: largest YAML case file read whole (JSONL is streamed and has no such limit)
MAX_YAML_BYTES = 100_000_000

#: (where, the row or its problems, whether its rowId was made from the file name and place)
Parsed = tuple[str, DialogueRow | list[Problem], bool]
_EXPECTED = {
    "jsonl": "one JSON object per line with `messages`",
    "json": "an array of rows, a tau2-bench file whose `simulations` list is not empty, or an "
    "OTLP/JSON export with GenAI spans",
    "csv": "a header line and one row per dialogue",
    "yaml": "one case per document (or a list of cases) with the agent's run",
}


def _too_deep() -> RowShapeError:
    """Python's JSON decoder recurses: JSON nested about a thousand levels deep exhausts it."""
    return RowShapeError(
        "",
        f"JSON nested far deeper than the {MAX_ROW_DEPTH} levels a row may have; flatten it",
    )


def _case_name(obj: Any) -> str:
    """``case <id>: `` for messages about an eval case (a row with checks or in a case shape
    of docs/cases.md) that names itself, else ``""``: a plain dialogue row is found by its line."""
    is_case = isinstance(obj, dict) and (
        "expected" in obj or is_diagnosis_case(obj) or is_eval_case(obj) or is_rag_agent_row(obj)
    )
    if is_case:
        found = next((obj[k] for k in ID_KEYS if isinstance(obj.get(k), str | int)), None)
        if found is not None:
            return f"case {found}: "
    return ""


#: pydantic's wording → what a case author reads (the field path is given separately)
_PLAIN = {
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "dict_type": "must be a mapping (a JSON object)",
    "string_type": "must be a text string",
    "int_type": "must be a whole number",
    "bool_type": "must be true or false",
    "missing": "is required",
}


def _plain(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "too_short" and "min_length" in ctx:
        return (
            f"must list at least {ctx['min_length']} entr{'y' if ctx['min_length'] == 1 else 'ies'}"
        )
    message: str = err["msg"]
    return message.removeprefix("Value error, ")


def _problem(where: str, case: str, err: Any, top_fields: str | None = None) -> Problem:
    """One pydantic error as a Problem: check-union tags dropped, plain wording, valid choices
    named (``top_fields``: the valid top-level fields of the case shape being read)."""
    loc = strip_tags(tuple(err["loc"]))
    message = check_error_message(err) or _plain(err)
    if err["type"] == "extra_forbidden":
        tags = [m for p in err["loc"] if isinstance(p, str) and (m := check_model(p))]
        valid = (
            ", ".join(f.alias or n for n, f in tags[-1].model_fields.items())
            if tags
            else top_fields
            if top_fields and len(loc) == 1
            else "see docs/cases.md"
        )
        close = difflib.get_close_matches(str(loc[-1]), valid.split(", "), n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        message = f"unknown field {loc[-1]!r}{guess}; valid fields here: {valid}"
    elif err["type"] == "enum":
        message += f" (got {err.get('input')!r})"
    return Problem(where, format_loc(loc), case + message)


@dataclass
class DialogueSource:
    """A dialogue file, validated whole before it is streamed.

    Attributes:
        path: the input file.
        input_format: one of :data:`INPUT_FORMATS`.
    """

    path: Path
    input_format: InputFormat = "auto"
    #: a YAML case's node by its place (``path:line``), so that a problem names its field's line
    _nodes: dict[str, yaml.Node] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def resolved_format(self) -> str:
        """The format read: :attr:`input_format`, or for ``auto`` the one the suffix (then the
        first bytes) tells."""
        if self.input_format != "auto":
            return self.input_format
        suffix = self.path.suffix.lower()
        if suffix in (".json", ".csv"):
            return suffix[1:]
        if suffix in (".yaml", ".yml"):
            return "yaml"
        with self.path.open("rb") as handle:
            head = handle.read(64).lstrip()
        return "json" if head.startswith(b"[") else "jsonl"

    def _objects(self) -> Iterator[tuple[str, Any, str]]:
        """Yield ``(where, raw object or error, default id)`` in file order."""
        fmt, stem = self.resolved_format(), self.path.stem
        if fmt == "jsonl":
            place = f"{self.path}:"
            # "utf-8-sig" decodes each block in Python: its BOM is dropped here instead
            with self.path.open(encoding="utf-8") as handle:
                for n, line in enumerate(handle, start=1):
                    if n == 1 and line.startswith("\ufeff"):
                        line = line[1:]
                    if not line or line.isspace():  # blank (not line.strip(): no copy)
                        continue
                    try:
                        obj = loads_strict(line)
                    except (json.JSONDecodeError, DuplicateKeyError) as exc:
                        yield f"{self.path}:{n}", exc, f"{stem}-{n}"
                        continue
                    except RecursionError:
                        yield f"{self.path}:{n}", _too_deep(), f"{stem}-{n}"
                        continue
                    if is_otlp_export(obj):  # a Collector file exporter: one export per line
                        for where, row, span_id in otlp_rows(obj):
                            default = f"{stem}-{n}-{span_id or where}"
                            yield f"{self.path}:{n} {where}".rstrip(), row, default
                    else:  # the common row: its place from the path's text, made once
                        yield f"{place}{n}", obj, f"{stem}-{n}"
        elif fmt == "csv":
            yield from csv_objects(self.path, stem)
        elif fmt == "yaml":
            yield from self._yaml_objects(stem)
        else:
            yield from self._json_objects(stem)

    def _yaml_objects(self, stem: str) -> Iterator[tuple[str, Any, str]]:
        """Eval cases in YAML: one per document, or a list per document."""
        text = self.path.read_text(encoding="utf-8-sig")
        try:
            documents = load_documents(text, MAX_YAML_BYTES)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{self.path}:{mark.line + 1}" if mark else str(self.path)
            what = "refused" if isinstance(exc, YamlLimitError) else "not valid YAML"
            yield where, RowShapeError("", f"{what}: {yaml_problem(exc)}"), stem
            return
        for node, doc in documents:
            repeated = duplicate_keys(node) if node is not None else []
            if repeated:  # YAML would keep the last value silently; JSON inputs refuse it too
                line, _, key, first = repeated[0]
                problem = (
                    f"the key {key!r} appears twice in one mapping (first at line {first}); "
                    "write it once (a reader would silently keep only the last value)"
                )
                yield f"{self.path}:{line}", RowShapeError("", problem), f"{stem}-{line}"
                continue
            if isinstance(doc, list) and isinstance(node, yaml.SequenceNode):
                for item_node, item in zip(node.value, doc, strict=True):
                    line = item_node.start_mark.line + 1
                    self._nodes[f"{self.path}:{line}"] = item_node
                    yield f"{self.path}:{line}", item, f"{stem}-{line}"
            elif doc is not None:
                line = node.start_mark.line + 1 if node is not None else 1
                if node is not None:
                    self._nodes[f"{self.path}:{line}"] = node
                yield f"{self.path}:{line}", doc, f"{stem}-{line}"

    def _json_objects(self, stem: str) -> Iterator[tuple[str, Any, str]]:
        try:
            data = loads_strict(self.path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as exc:
            yield f"{self.path}:{exc.lineno}", exc, stem
            return
        except DuplicateKeyError as exc:
            yield str(self.path), exc, stem
            return
        except RecursionError:
            yield str(self.path), _too_deep(), stem
            return
        if isinstance(data, dict) and "simulations" in data:
            for where, obj, default_id in tau2_rows(data):
                yield f"{self.path}: {where}", obj, default_id
        elif is_otlp_export(data):
            for where, obj, span_id in otlp_rows(data):
                yield f"{self.path}: {where}".rstrip(": "), obj, f"{stem}-{span_id or where}"
        elif isinstance(data, list):
            domain = taubench_domain(stem)
            for i, obj in enumerate(data):
                if is_taubench_trajectory(obj):
                    obj = taubench_row(obj, domain)
                yield f"{self.path}: [{i}]", obj, f"{stem}-{i + 1}"
        else:
            yield (
                str(self.path),
                RowShapeError(
                    "",
                    "a .json input must be an array of rows or a tau2-bench results file "
                    "{tasks, simulations}, or an OpenTelemetry OTLP/JSON trace export "
                    "{resourceSpans: [{scopeSpans: [{spans}]}]}; for one row per line use "
                    ".jsonl",
                ),
                stem,
            )

    def _parse(self) -> Iterator[Parsed]:
        return _parse_objects(self._objects(), self.path, self.resolved_format(), self._place)

    def _place(self, where: str, loc: tuple[str | int, ...]) -> str:
        """Where the field at ``loc`` of the object read at ``where`` is: its own line in a
        YAML file (a case spans many lines), else ``where``."""
        node = self._nodes.get(where)
        return where if node is None else f"{self.path}:{line_of(node, loc)}"

    def validate(self, seen: Seen | None = None) -> int:
        """Check every row; return the row count (:meth:`read` without keeping the rows)."""
        return self.check(lambda row: None, seen)

    def read(self, seen: Seen | None = None) -> list[DialogueRow]:
        """Parse and check every row once; return them in file order.

        Args:
            seen: rowIds already taken (by earlier files of the same task) → where
                (:data:`Seen`: a :class:`SeenIds`, or a dict whose places end in
                :data:`GENERATED` when that row had no rowId); updated.

        Raises:
            DatasetError: the file is missing or unreadable, or rows are malformed or share a
                rowId; lists up to :data:`MAX_PROBLEMS` problems with their lines.
        """
        rows: list[DialogueRow] = []
        self.check(rows.append, seen)
        return rows

    def check(self, keep: Callable[[DialogueRow], None], seen: Seen | None = None) -> int:
        """Parse and check every row once, handing each valid row to ``keep`` in file order
        (as it is parsed: rows are not held here); return the row count. When a problem is
        found, ``keep`` may have had the valid rows before it (the caller drops them).

        Raises:
            DatasetError: as :meth:`read`.
        """
        if not self.path.is_file():
            what = "is a folder, not a file" if self.path.is_dir() else "not found"
            raise DatasetError(
                f"{self.path}: input file {what}; pass .jsonl, .json, .csv or .yaml dialogue "
                "or case files"
            )
        try:
            count = _checked_rows(self._parse(), seen, str(self.path), keep)
        except UnicodeDecodeError as exc:
            raise DatasetError(not_utf8_problem(self.path, exc)) from exc
        except csv.Error as exc:
            raise DatasetError(
                f"{self.path}: not valid CSV ({exc}); quote fields that hold commas or line breaks"
            ) from exc
        if not count:
            raise DatasetError(
                f"{self.path}: no rows found; expected {_EXPECTED[self.resolved_format()]}"
            )
        return count

    def __iter__(self) -> Iterator[DialogueRow]:
        """Stream rows in file order. Call :meth:`validate` first; a broken row here raises."""
        for where, parsed, _ in self._parse():
            if isinstance(parsed, list):
                raise DatasetError(f"{where}: row changed since validation", parsed)
            yield parsed


def _parse_objects(
    objects: Iterable[tuple[str, Any, str]],
    case_file: Path,
    fmt: str,
    place: Callable[[str, tuple[str | int, ...]], str] | None = None,
) -> Iterator[Parsed]:
    """Each raw object as a row, or as the problems that keep it from being one.

    Args:
        objects: ``(where, raw object or read error, default rowId)`` in input order.
        case_file: where a diagnosis case's ``traceFixture`` is looked up from.
        fmt: the input format, for the wording of a JSON syntax error.
        place: where a field of the object read at ``where`` is (a YAML case's field line);
            by default ``where``.
    """
    for where, obj, default_id in objects:
        if isinstance(obj, _UNREAD):
            yield where, _unread(where, obj, fmt), False
            continue
        elif isinstance(obj, DialogueRow):
            yield where, obj, False
            continue
        given = obj  # the object as read: its case name is asked only for a message
        try:
            if is_diagnosis_case(obj):
                obj = diagnosis_row(obj, load_fixture(str(obj["traceFixture"]), case_file))
            row = row_from_object(obj, default_id)
            # asked only of a row whose id is its default: most rows name themselves
            yield where, row, row.row_id == default_id and not _names_itself(obj)
        except RowShapeError as exc:
            yield where, [Problem(where, exc.field, f"{_case_name(given)}{exc}")], False
        except ValidationError as exc:
            case = _case_name(given)
            fields = (
                diagnosis_fields()
                if is_diagnosis_case(obj)
                else eval_case_fields()
                if is_eval_case(given)
                else None
            )
            problems = [
                _problem(
                    place(where, strip_tags(tuple(err["loc"]))) if place else where,
                    case,
                    err,
                    fields,
                )
                for err in exc.errors()
            ]
            yield where, problems, False


#: what the sources yield for an object they could not read (:func:`_unread`)
_UNREAD = (DuplicateKeyError, json.JSONDecodeError, RowShapeError)


def _unread(
    where: str, error: DuplicateKeyError | json.JSONDecodeError | RowShapeError, fmt: str
) -> list[Problem]:
    """The problem of an object a source could not read (``fmt``: the input format, for the
    wording of a JSON syntax error)."""
    if isinstance(error, DuplicateKeyError):
        return [Problem(where, "", f"not a valid row: {error}")]
    if isinstance(error, json.JSONDecodeError):
        unit = "line" if fmt == "jsonl" else "file"
        hint = (
            "each line must be one JSON object"
            if fmt == "jsonl"
            else "the file must be one JSON array of rows (or a tau2 results file); for one "
            "row per line use .jsonl"
        )
        return [Problem(where, "", f"not valid JSON ({json_problem(error, unit)}); {hint}")]
    return [Problem(where, error.field, str(error))]


def _names_itself(obj: Any) -> bool:
    """Whether the object gives its own id (a non-blank value under one of :data:`ID_KEYS`)."""
    return isinstance(obj, dict) and any(
        obj.get(k) is not None and str(obj[k]).strip() for k in ID_KEYS
    )


#: marks a place in ``seen`` whose row had no rowId and was given ``<file stem>-<line>``
GENERATED = " (no rowId: named after its file and line)"
_MADE = "where the row is (`<file name>-<line>`; `row-<n>` for rows given in memory)"


class _DictSeen:
    """A plain ``dict[str, str]`` given as ``seen`` (id → place, ending in :data:`GENERATED`
    for a made id), asked and updated as a :class:`SeenIds` is."""

    def __init__(self, seen: dict[str, str]) -> None:
        self._seen = seen

    def __contains__(self, row_id: str) -> bool:
        return row_id in self._seen

    def first(self, row_id: str) -> tuple[str, bool] | None:
        where = self._seen.get(row_id)
        if where is None:
            return None
        return where.removesuffix(GENERATED), where.endswith(GENERATED)

    def claim(self, row_id: str, where: str, generated: bool = False) -> tuple[str, bool] | None:
        first = self.first(row_id)
        if first is None:
            self._seen[row_id] = where + (GENERATED if generated else "")
        return first


def _duplicate(row_id: str, first: str, first_generated: bool, generated: bool) -> str:
    """Why ``row_id`` is refused the second time (``first``: where it was taken), when one or
    both rows were given their id from the file name and place (``<stem>-<line>``: files of
    one name in two folders, or an explicit rowId that happens to look like one)."""
    if not generated and not first_generated:
        return f"duplicate rowId {row_id!r} (first at {first}); rowIds must be unique within a task"
    if generated and first_generated:
        return (
            f"duplicate rowId {row_id!r}: neither this row nor the one at {first} has a rowId, "
            "and the ids made from the file name and line are the same (files of the same name "
            "in different folders); give the rows a `rowId`, or rename one of the files"
        )
    if generated:
        return (
            f"duplicate rowId {row_id!r}: this row has no rowId, and the id made from {_MADE} "
            f"is the rowId the row at {first} gives; give this row a `rowId`"
        )
    return (
        f"duplicate rowId {row_id!r}: the row at {first} has no rowId and was given this id "
        f"from {_MADE}; give that row a `rowId`, or choose another one here"
    )


def _checked_rows(
    parsed: Iterable[Parsed],
    seen: Seen | None,
    name: str,
    keep: Callable[[DialogueRow], None],
) -> int:
    """Hand each valid row to ``keep``; return how many there were, once every row parsed
    and no rowId repeats (here or in ``seen``).

    Raises:
        DatasetError: up to :data:`MAX_PROBLEMS` problems, each with its place.
    """
    problems: list[Problem] = []
    taken = SeenIds() if seen is None else _DictSeen(seen) if isinstance(seen, dict) else seen
    count = 0
    for where, found, generated in parsed:
        if isinstance(found, list):
            problems.extend(found)
            continue
        taken_at = taken.claim(found.row_id, where, generated)
        if taken_at is not None:
            first, first_generated = taken_at
            problems.append(
                Problem(where, "rowId", _duplicate(found.row_id, first, first_generated, generated))
            )
        else:
            keep(found)
            count += 1
    if problems:
        grouped = _grouped(problems)
        shown = grouped[:MAX_PROBLEMS]
        more = sum(p.count for p in grouped[MAX_PROBLEMS:])
        raise DatasetError(
            f"{name}: {len(problems)} problem(s) in the input; nothing was scored. Fix "
            "them and run again" + (f" ({more} more not shown)" if more else ""),
            [p.problem for p in shown],
        )
    return count


#: of a problem repeated on many rows, the places named after the first
REPEATS_NAMED = 4


@dataclass(frozen=True)
class _Repeated:
    """One problem as shown, standing for ``count`` rows with the same field and message."""

    problem: Problem
    count: int


def _grouped(problems: list[Problem]) -> list[_Repeated]:
    """The problems with one line for each field and message, at its first place, naming
    where else it occurs: a file in a shape the readers do not know gets one line saying so,
    not the same line for each of its rows."""
    places: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        places.setdefault((p.field, p.message), []).append(p.where)
    out = []
    for (at, message), wheres in places.items():
        where, others = wheres[0], wheres[1 : 1 + REPEATS_NAMED]
        if len(wheres) > 1:
            rest = len(wheres) - 1 - len(others)
            where += f" (the same on {len(wheres) - 1} more row(s): {', '.join(others)}" + (
                f" and {rest} more)" if rest > 0 else ")"
            )
        out.append(_Repeated(Problem(where, at, message), len(wheres)))
    return out


#: what an in-memory row may be: a validated row, or an object in any accepted row shape
MemoryRow = DialogueRow | Mapping[str, object]


@dataclass(frozen=True)
class MemorySource:
    """Rows given in memory (the library's ``ScoreOptions.rows``) instead of a file.

    Attributes:
        rows: :class:`DialogueRow` values, or mappings in any row shape a file may hold (a
            ``messages`` row, a case of docs/cases.md, a tau-bench trajectory …); checked
            like a file's rows. A row without ``rowId`` gets ``row-<n>`` (1-based).
        name: how messages name the input (``rows[3]: …``).
    """

    rows: Sequence[MemoryRow]
    name: str = "rows"

    def read(self, seen: Seen | None = None) -> list[DialogueRow]:
        """Check every row once; return them in order (``seen`` as :meth:`DialogueSource.read`).

        Raises:
            DatasetError: no rows, or malformed or duplicated rows (every problem, with its
                index).
        """
        objects = (
            (
                f"{self.name}[{i}]",
                obj if isinstance(obj, DialogueRow) else dict(obj),
                f"row-{i + 1}",
            )
            for i, obj in enumerate(self.rows)
        )
        rows: list[DialogueRow] = []
        _checked_rows(
            _parse_objects(objects, Path.cwd() / self.name, "json"), seen, self.name, rows.append
        )
        if not rows:
            raise DatasetError(f"{self.name}: no rows given; pass at least one dialogue row")
        return rows
