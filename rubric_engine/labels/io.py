"""Label files: JSONL and CSV, read with full validation before anything is stored
(docs/calibration.md).

One label a line with at least ``rowId``, ``requirementId``, ``status``, ``reviewer`` (or a
row-level line without ``requirementId``/``status``), plus optional ``intentKey``,
``redFlagTypes``, ``score``, ``reason``, ``time``, ``evidenceTurns`` and the other
:class:`~rubric_engine.labels.model.Label` fields. In CSV a list cell is a JSON list or
``;``-separated, an empty cell is absent. Every problem of a file is reported at once
(file:line, field, valid choices); :func:`check_against_task` adds the task's checks (unknown
rows, requirement IDs outside the row's applicable set, intent keys, red-flag types, a rubric
mismatch). Nothing is half-imported: the caller stores only a file that passed every check.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError

from rubric_engine.dialogue.csv_rows import allow_long_fields, repeated_columns
from rubric_engine.errors import InputError, Problem, format_loc
from rubric_engine.formats.csv_cells import plain_cell, text_cell
from rubric_engine.formats.jsonl import (
    json_problem,
    loads_strict,
    lone_surrogate_in,
    not_utf8_problem,
)
from rubric_engine.labels.file_keys import FileKeys
from rubric_engine.labels.model import Label
from rubric_engine.labels.pins import RubricPins, pin_label, rubric_pins

if TYPE_CHECKING:
    from rubric_engine.report import StoredTask
    from rubric_engine.rubric.model import EvalRubric, ScoreScale
    from rubric_engine.store.backend import Backend

__all__ = [
    "LABEL_FIELDS",
    "check_against_rubrics",
    "check_against_task",
    "read_against_task",
    "read_label_file",
    "read_label_lines",
    "render_labels",
    "reviewer_case_problems",
    "unknown_fields",
]

#: camelCase field names, in the order files are written
LABEL_FIELDS = tuple(f.alias or n for n, f in Label.model_fields.items())
_LISTS = ("redFlagTypes", "evidenceTurns")


def _choices(values: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f", … ({len(values)} in all)" if len(values) > limit else "")


def _csv_record(record: dict[str, str | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, cell in record.items():
        if name is None or cell is None or cell.strip() == "":
            continue
        text = plain_cell(cell.strip())  # as labels export wrote it (formula-safe)
        if name in _LISTS:
            parsed: Any = json.loads(text) if text.startswith("[") else text.split(";")
            if name == "evidenceTurns":
                parsed = [int(p) for p in parsed]
            out[name] = [p.strip() if isinstance(p, str) else p for p in parsed]
        elif name == "metadata":
            out[name] = json.loads(text)
        elif name == "sawJudgeVerdict":
            out[name] = text.lower() in ("true", "1", "yes")
        elif name == "score":
            out[name] = _number(text)  # text that is no number: the model names the field
        elif name == "rubricVersion":
            out[name] = int(text)
        else:
            out[name] = text
    return out


def _number(text: str) -> float | str:
    """A CSV cell as the number it spells, else the text itself (refused by the model)."""
    try:
        return float(text)
    except ValueError:
        return text


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """Each record of a label file with its line (a JSON array's item number), read as they
    come: a JSONL or CSV file is never held whole (a JSON array is).

    Raises:
        InputError: the file cannot be read, is not UTF-8, or is not valid CSV.
    """
    choices = "pass a .jsonl, .json or .csv file of labels (docs/calibration.md)"
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a label file; {choices}")
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            if path.suffix.lower() == ".csv":
                yield from _csv_records(path, handle)
            elif _starts_array(handle):  # "line" is the item's number
                yield from enumerate(_array(path, handle.read()), start=1)
            else:
                for number, line in enumerate(handle, start=1):
                    if line.strip():
                        yield number, line
    except UnicodeDecodeError as exc:  # its line, as the dialogue readers say it
        raise InputError(not_utf8_problem(path, exc) + "; nothing was imported") from exc
    except FileNotFoundError as exc:
        raise InputError(f"{path}: label file not found; {choices}") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the label file ({exc})") from exc


def _starts_array(handle: TextIO) -> bool:
    """The file's first character other than white space is ``[`` (read from the start)."""
    while chunk := handle.read(4096):
        text = chunk.lstrip()
        if text:
            handle.seek(0)
            return text.startswith("[")
    handle.seek(0)
    return False


def _array(path: Path, text: str) -> list[Any]:
    try:
        items = loads_strict(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a JSON array of labels ({exc})") from exc
    except RecursionError as exc:  # the decoder recurses: ~1000 levels exhaust it
        raise InputError(f"{path}: not a JSON array of labels (it nests too deep)") from exc
    return items if isinstance(items, list) else [items]


def _csv_records(path: Path, handle: TextIO) -> Iterator[tuple[int, dict[str, Any]]]:
    # strict, as the dialogue CSV reader: an unbalanced quote swallowed the lines after
    # it into one field (a label missing its reviewer, or none at the file's end)
    allow_long_fields()  # a label's reason as long as in its JSONL twin
    reader = csv.DictReader(handle, strict=True)
    try:
        twice = repeated_columns(reader.fieldnames or [])
        if twice:
            raise InputError(f"{path}:1: {twice}")
        for rec in reader:
            yield reader.line_num, dict(rec)
    except csv.Error as exc:
        raise InputError(
            f"{path}:{reader.line_num + 1}: the record starting on this line is not "
            f"valid CSV ({exc}); a quote inside a quoted "
            'field is written twice (""), and every quoted field needs its closing quote; '
            "nothing was imported"
        ) from exc


def _keep_unknown(data: dict[str, Any]) -> dict[str, Any]:
    """Fields this format does not define move under ``metadata`` (a file made elsewhere keeps
    its own columns); ``unknown_fields`` lists them so a typo is still seen."""
    known = {**{f: f for f in LABEL_FIELDS}, **{n: n for n in Label.model_fields}}
    extra = {k: v for k, v in data.items() if k not in known}
    if not extra:
        return data
    kept = {k: v for k, v in data.items() if k in known}
    return {**kept, "metadata": {**(kept.get("metadata") or {}), **extra}}


def unknown_fields(labels: Sequence[Label]) -> list[str]:
    """The field names kept under ``metadata``, first-seen order (for a note to the user)."""
    return list(dict.fromkeys(k for lab in labels for k in lab.metadata))


def read_label_file(path: Path) -> list[Label]:
    """Read and validate every line of a JSONL (``.jsonl``/``.json``) or CSV (``.csv``) file.

    Returns:
        The labels in file order (duplicates refused, see below).

    Raises:
        InputError: the file cannot be read, or lines are malformed, or two lines give the same
            (row, requirement, reviewer) or different row-level values for one (row, reviewer);
            every problem listed with its line.
    """
    return [label for _, label in read_label_lines(path)]


def read_label_lines(path: Path, problems: list[Problem] | None = None) -> list[tuple[int, Label]]:
    """:func:`read_label_file`'s labels, each with its line (a JSON array's item number), so
    a later check can name ``FILE:LINE`` as the file's own problems are named.

    Args:
        problems: when given, the lines' problems are added to it instead of raised, and the
            valid labels returned, so that a later check (:func:`check_against_task`) lists
            them with its own; a file with no label at all is still refused.
    """
    own: list[Problem] = []
    numbered = list(label_stream(path, own))
    if problems is None or not numbered:  # no label: nothing for a later check to look at
        refuse_problems(path, own, any_label=bool(numbered))
    else:
        problems += own
    return numbered


def label_stream(path: Path, problems: list[Problem]) -> Iterator[tuple[int, Label]]:
    """Each valid label of the file with its line, as the file is read; each line's problems
    are added to ``problems``, with a line that repeats an earlier one's (row, requirement,
    reviewer) or contradicts its row-level values
    (:class:`~rubric_engine.labels.file_keys.FileKeys`). A caller stores nothing until the
    last line is read and ``problems`` is empty (:func:`refuse_problems`)."""
    keys = FileKeys(str(path))
    try:
        for number, raw in _records(path):
            label = _label_at(f"{path}:{number}", path.suffix.lower() == ".csv", raw, problems)
            if label is not None:
                problems += keys.problems(number, label)
                yield number, label
    finally:
        keys.close()


#: how a line that is no JSON at all is named (a file of nothing else is named once)
_NOT_A_LABEL_LINE = "not a valid label line"


def refuse_problems(path: Path, problems: list[Problem], *, any_label: bool) -> None:
    """Raise what :func:`read_label_file` raises for a file read with these problems.

    Raises:
        InputError: ``problems``, or no label at all.
    """
    if not any_label and not problems:
        problems.append(Problem(str(path), "", "holds no label; one label a line is expected"))
    not_json = [p for p in problems if p.message.startswith(_NOT_A_LABEL_LINE)]
    if not any_label and len(not_json) > 1 and len(not_json) == len(problems):
        first = not_json[0]  # some other file: one problem, not one for each of its lines
        problems[:] = [
            Problem(
                str(path),
                "",
                f"no line of it is a JSON label ({len(not_json)} lines; line "
                f"{first.where.rsplit(':', 1)[-1]}: {first.message}): it is not a label file; "
                "pass a .jsonl, .json or .csv file of labels (docs/calibration.md)",
            )
        ]
    if problems:
        raise InputError(f"{path}: {len(problems)} problem(s); nothing was imported", problems)


def _label_at(where: str, csv_file: bool, raw: Any, problems: list[Problem]) -> Label | None:
    """The label of one record, or ``None`` with its problems added to ``problems``."""
    if csv_file and None in raw:  # csv.DictReader puts the cells past the header under None
        problems.append(
            Problem(
                where,
                "",
                "the line has more fields than the header; quote fields that contain commas "
                '(e.g. "no triage, no referral")',
            )
        )
        return None
    try:
        if isinstance(raw, str):  # a JSONL line
            data = loads_strict(raw)
        elif csv_file:
            data = _csv_record(raw)
        else:  # an item of a JSON array
            data = raw
    except (ValueError, TypeError) as exc:
        said = json_problem(exc) if isinstance(exc, json.JSONDecodeError) else str(exc)
        problems.append(Problem(where, "", f"{_NOT_A_LABEL_LINE} ({said})"))
        return None
    except RecursionError:  # the decoder recurses: ~1000 levels exhaust it
        problems.append(Problem(where, "", f"{_NOT_A_LABEL_LINE} (it nests too deep)"))
        return None
    half = lone_surrogate_in(data)
    if half is not None:
        problems.append(
            Problem(
                where,
                "",
                f"not text: it holds a lone surrogate ({half}, half of a UTF-16 pair, "
                "from an escape like \\ud800); write every character whole",
            )
        )
        return None
    misspelt = _misspelt_fields(data) if isinstance(data, dict) else {}
    if isinstance(data, dict):
        data = _keep_unknown(data)
        name = data.get("reviewer")
        if isinstance(name, str) and name.strip() and name != name.strip():
            problems.append(
                Problem(
                    where,
                    "reviewer",
                    f"{name!r} starts or ends with white space; write {name.strip()!r} ("
                    f"{name!r} and {name.strip()!r} would count as two reviewers)",
                )
            )
            return None
    try:
        return Label.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            field = format_loc(list(err["loc"]))
            hint = (
                " (valid fields: " + ", ".join(LABEL_FIELDS) + ")"
                if err["type"] == "extra_forbidden"
                else ""
            )
            # a field the line misses, or a rule between fields: name a look-alike it has
            near = [
                f"the line has {given!r}: did you mean {meant!r}?"
                for given, meant in misspelt.items()
                if meant == field or (not field and err["type"] != "missing")
            ]
            if near:
                hint += " (" + "; ".join(near) + ")"
            message = err["msg"].removeprefix("Value error, ")
            problems.append(Problem(where, field, message + hint))
        return None


def reviewer_case_problems(
    path: Path, rubric_key: str, names: Iterable[str], stored: Iterable[str]
) -> list[Problem]:
    """A reviewer of a file whose name differs only by case from another of the file or from
    one already stored for ``rubric_key`` (``Bob`` and ``bob``): two spellings would count as
    two reviewers in Krippendorff's α and the alternative annotator test (docs/calibration.md).

    Args:
        names: the reviewers of the file's labels of ``rubric_key``, first-seen order.
        stored: the reviewers stored for ``rubric_key``.
    """
    known: dict[str, tuple[str, str]] = {}
    spelt = set()
    for name in stored:
        spelt.add(name)
        known.setdefault(name.casefold(), (name, f"already stored for rubric {rubric_key}"))
    problems = []
    for name in dict.fromkeys(names):
        if name in spelt:  # a spelling already stored (stores from before this check may
            continue  # hold two): its labels go on under it
        other, where = known.setdefault(name.casefold(), (name, "also in this file"))
        if other != name:
            problems.append(
                Problem(
                    str(path),
                    "reviewer",
                    f"{name!r} differs only by case from {other!r} ({where}): two spellings "
                    f"count as two reviewers; write {other!r} if they are one person, or give "
                    "each person a name that differs by more than case",
                )
            )
    return problems


def _misspelt_fields(data: dict[str, Any]) -> dict[str, str]:
    """Keys of a record that are no label field but look like one (``reviwer``, ``stauts``):
    the key → the field it is probably meant to be."""
    out = {}
    for key in data:
        if isinstance(key, str) and key not in LABEL_FIELDS:
            close = difflib.get_close_matches(key, LABEL_FIELDS, n=1, cutoff=0.75)
            if close:
                out[key] = close[0]
    return out


def _score_problems(where: str, score: float | None, scale: ScoreScale) -> list[Problem]:
    """A label's ``score`` outside the pack's scale (a score between its points is refused as
    the file is read: scores are whole points in every mode, :class:`Label`)."""
    if score is None or scale.min <= score <= scale.max:
        return []
    return [Problem(where, "score", f"{score:g} is outside the scale {scale.min}..{scale.max}")]


def check_against_rubrics(
    labels: Sequence[Label], rubrics: dict[tuple[str, int | None], EvalRubric | str], path: Path
) -> list[Label]:
    """Check labels imported without a task against the rubric versions they name, and fill in
    each one's version, hash and pins from that version.

    Args:
        rubrics: ``(rubricKey, rubricVersion)`` of every label → the stored pack, or why there
            is none (an unknown key or version, with the versions there are).

    Raises:
        InputError: a rubric key or version not in the store, a requirement ID, intent key or
            red-flag type the pack does not have, or a score off its scale; every problem is
            listed with the valid choices. Case-level requirement IDs (``CASE_…``) belong to
            rows, not packs, so only a task can check them (``--task``).
    """
    problems: list[Problem] = []
    out: list[Label] = []
    pins_of: dict[tuple[str, int], RubricPins] = {}
    for index, lab in enumerate(labels, start=1):
        found = rubrics[(lab.rubric_key or "", lab.rubric_version)]
        filled = check_label_rubric(lab, found, f"{path}: label {index}", pins_of, problems)
        if filled is not None:
            out.append(filled)
    if problems:
        raise InputError(
            f"{path}: {len(problems)} problem(s) against the stored rubric versions; nothing was "
            "imported",
            problems,
        )
    return out


def check_label_rubric(
    lab: Label,
    found: EvalRubric | str,
    where: str,
    pins_of: dict[tuple[str, int], RubricPins],
    problems: list[Problem],
) -> Label | None:
    """One label of :func:`check_against_rubrics` checked against the rubric version it names
    (``found``: the pack, or why there is none): the label filled in, or ``None``; its
    problems are added to ``problems`` (``where``: its place, the row is added). ``pins_of``
    keeps each version's pins, worked out once."""
    where = f"{where} (row {lab.row_id})"
    if isinstance(found, str):
        problems.append(Problem(where, "rubricKey", found))
        return None
    filled = lab.model_copy(
        update={"rubric_version": found.version, "rubric_hash": found.content_hash()}
    )
    ref = (found.key, found.version)
    if ref not in pins_of:
        pins_of[ref] = rubric_pins(found)
    checks = (
        ("requirementId", lab.requirement_id, list(found.requirements_by_id)),
        ("intentKey", lab.intent_key, list(found.intents_by_key)),
        *(("redFlagTypes", flag, list(found.red_flag_types)) for flag in lab.red_flag_types or ()),
    )
    for field, value, valid in checks:
        if (
            value is None
            or value in valid
            or (field == "requirementId" and value.startswith("CASE_"))
        ):
            continue
        problems.append(
            Problem(
                where,
                field,
                f"{value!r} is not in {found.key}@{found.version}; valid: {_choices(valid)}",
            )
        )
    problems += _score_problems(where, lab.score, found.score_scale)
    return pin_label(filled, pins_of[ref])


def check_against_task(
    labels: Sequence[Label],
    task: StoredTask,
    path: Path,
    dialogues: Mapping[str, str] | None = None,
    lines: Sequence[int] | None = None,
    earlier: Sequence[Problem] = (),
) -> list[Label]:
    """Check labels against a stored task and fill in its rubric, task id and pins
    (:mod:`rubric_engine.labels.pins`).

    Args:
        lines: each label's line in ``path`` (:func:`read_label_lines`): a problem is named
            ``FILE:LINE``; without them, by the label's count in ``labels``.
        earlier: the problems of the file's own lines (:func:`read_label_lines` with
            ``problems``), listed first with the task's: one run names them all.
        dialogues: rowId → the dialogue pin of the task's row
            (:func:`rubric_engine.labels.store.dialogue_pins`): each label is pinned to its
            row's dialogue, and a label that names another (made on another task's dialogue
            under the same rowId) is refused.

    A requirement is valid for a row when it is in the row's referenceBasis, or among the
    common and intent requirements of the intent the reviewer gave for that row (a reviewer
    may pick another intent than the judge did). A row without a verdict (JUDGE_ERROR) takes
    any requirement it could have had, its case-level ones included: the label is kept and
    calibration counts it as "no verdict to compare".

    Raises:
        InputError: unknown rowIds, requirement IDs outside the row's applicable set, unknown
            intent keys or red-flag types, a score off the pack's scale, or a rubric key,
            version or hash other than the task's, a requirementHash other than the task's
            requirement's, or a dialogueHash other than the row's; each problem lists the
            valid choices.
    """
    rubric, record = task.rubric, task.record
    dialogues = dialogues or {}
    pins = rubric_pins(rubric)
    rows = {row.result.row_id: row for row in task.rows}
    intents = list(rubric.intents_by_key)
    flags = list(rubric.red_flag_types)
    chosen = {lab.row_id: lab.intent_key for lab in labels if lab.intent_key}
    problems: list[Problem] = []
    out: list[Label] = []
    for index, lab in enumerate(labels, start=1):
        at = f"{path}:{lines[index - 1]}" if lines is not None else f"{path}: label {index}"
        where = f"{at} (row {lab.row_id})"
        row = rows.get(lab.row_id)
        if row is None:
            problems.append(
                Problem(
                    where,
                    "rowId",
                    f"not a row of task {record.id}; valid: {_choices(sorted(rows))}",
                )
            )
            continue
        for field, mine, theirs in (
            ("rubricKey", lab.rubric_key, record.rubric_key),
            ("rubricVersion", lab.rubric_version, record.rubric_version),
            ("rubricHash", lab.rubric_hash, record.rubric_hash),
        ):
            if mine is not None and mine != theirs:
                problems.append(
                    Problem(
                        where,
                        field,
                        f"{mine!r} but task {record.id} was scored under {theirs!r}; label "
                        "against a task of that rubric, or drop the field to take the task's",
                    )
                )
        if lab.intent_key is not None and lab.intent_key not in intents:
            problems.append(
                Problem(
                    where,
                    "intentKey",
                    f"{lab.intent_key!r} is not an intent of {rubric.key}@{rubric.version}; "
                    f"valid: {_choices(intents)}",
                )
            )
        for flag in lab.red_flag_types or ():
            if flag not in flags:
                problems.append(
                    Problem(
                        where,
                        "redFlagTypes",
                        f"{flag!r} is not a red-flag type of {rubric.key}; "
                        f"valid: {_choices(flags)}",
                    )
                )
        problems += _score_problems(where, lab.score, rubric.score_scale)
        messages = row.facts.messages
        outside = [t for t in lab.evidence_turns if messages is not None and not 0 <= t < messages]
        if outside and messages is not None:
            problems.append(
                Problem(
                    where,
                    "evidenceTurns",
                    f"{', '.join(map(str, outside))} not in row {lab.row_id}, whose "
                    f"{messages} message(s) are turns 0..{messages - 1} (0-based)",
                )
            )
        if lab.requirement_id is not None:
            valid = [b.requirement_id for b in row.result.reference_basis]
            intent = chosen.get(lab.row_id)
            if intent in intents:
                valid += [r.id for r in rubric.applicable_requirements(intent) if r.id not in valid]
            if not row.result.reference_basis:
                # no verdict (a JUDGE_ERROR row): what the row could have had, its case-level
                # requirements included; the label is kept, calibration has nothing to compare
                valid = [*(valid if intent in intents else rubric.requirements_by_id)]
                valid += [rid for rid in row.facts.case_texts if rid not in valid]
            if lab.requirement_id not in valid:
                why = (
                    ""
                    if row.result.reference_basis
                    else f" (the row has no verdict: {row.result.status}; give the reviewer's "
                    "intentKey to narrow it)"
                )
                problems.append(
                    Problem(
                        where,
                        "requirementId",
                        f"{lab.requirement_id!r} is not applicable to row {lab.row_id}{why}; "
                        f"valid: {_choices(valid)}",
                    )
                )
            pinned = pins.requirements.get(lab.requirement_id)
            if (
                lab.requirement_hash is not None
                and pinned is not None
                and lab.requirement_hash != pinned
            ):
                problems.append(
                    Problem(
                        where,
                        "requirementHash",
                        f"{lab.requirement_hash!r} but {lab.requirement_id} in task "
                        f"{record.id}'s rubric is {pinned!r} (its text, category, red line or "
                        "cap changed); label against a task of the version you reviewed, or "
                        "drop the field",
                    )
                )
        seen = dialogues.get(lab.row_id)
        if lab.dialogue_hash is not None and seen is not None and lab.dialogue_hash != seen:
            problems.append(
                Problem(
                    where,
                    "dialogueHash",
                    f"the label was made on another dialogue than task {record.id}'s row "
                    f"{lab.row_id} ({lab.dialogue_hash} vs {seen}): a label applies to the "
                    "dialogue it was made on; label this task's row, or leave the line out",
                )
            )
        filled = lab.model_copy(
            update={
                "rubric_key": record.rubric_key,
                "rubric_version": record.rubric_version,
                "rubric_hash": record.rubric_hash,
                "task_id": record.id,
                "dialogue_hash": seen or lab.dialogue_hash,
            }
        )
        out.append(pin_label(filled, pins))
    if earlier:
        where = f", in its lines and against task {record.id}" if problems else ""
        problems = [*earlier, *problems]
    else:
        where = f" against task {record.id}"
    if problems:
        raise InputError(
            f"{path}: {len(problems)} problem(s){where}; nothing was imported", problems
        )
    return out


def read_against_task(
    path: Path, task: StoredTask, db: Backend, source: str | None = None
) -> list[Label]:
    """A label file's labels checked against ``task`` (:func:`check_against_task`), each
    pinned to the dialogue of the task's row it labels: the file's own problems and the task's
    are listed in one refusal, each named ``FILE:LINE``.

    Args:
        source: every label's ``source`` instead of the file's.

    Raises:
        InputError: as :func:`read_label_lines` and :func:`check_against_task`.
    """
    from rubric_engine.labels.store import dialogue_pins

    own: list[Problem] = []  # the lines' problems, listed with the task's
    numbered = read_label_lines(path, own)
    labels = [lab for _, lab in numbered]
    if source is not None:
        labels = [lab.model_copy(update={"source": source}) for lab in labels]
    pins = dialogue_pins(db, task.record.id, sorted({lab.row_id for lab in labels}))
    lines = [line for line, _ in numbered]
    return check_against_task(labels, task, path, pins, lines, own)


def render_labels(labels: Iterable[Label], fmt: str) -> str:
    """Labels as JSONL (one object a line) or CSV (a header of :data:`LABEL_FIELDS`, text
    cells formula-safe, :func:`~rubric_engine.formats.csv_cells.text_cell`); the output reads
    back with :func:`read_label_file` to the same labels."""
    return "".join(label_lines(labels, fmt))


def label_lines(labels: Iterable[Label], fmt: str) -> Iterator[str]:
    """:func:`render_labels`'s text a line at a time (the CSV header first), as the labels
    come."""
    if fmt == "jsonl":
        for lab in labels:
            yield json.dumps(lab.to_json_dict(), ensure_ascii=False) + "\n"
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=LABEL_FIELDS, lineterminator="\n")
    writer.writeheader()
    for lab in labels:
        row: dict[str, Any] = {}
        for name, value in lab.to_json_dict().items():
            if isinstance(value, list | dict):
                row[name] = json.dumps(value, ensure_ascii=False)
            elif isinstance(value, bool):
                row[name] = "true" if value else "false"
            elif isinstance(value, str):
                row[name] = text_cell(value)  # a reason "=…" is no formula in a spreadsheet
            else:
                row[name] = value
        writer.writerow(row)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()
