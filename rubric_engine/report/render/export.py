"""``rubric-eval export``: a task's rows as a table for analysts (CSV, Parquet, JSON Lines).

One record per dialogue (:func:`wide_records`): ``rowId``, ``outcome`` (PASS / FAIL /
RED_FLAG / JUDGE_ERROR, the report's pass rule: report/outcome.py), ``status``, ``intentKey``,
``judgeScore``, ``finalScore``, ``cappedBy``, ``redFlagTypes``, ``violatedRequirementIds``,
``partialRequirementIds``, ``scoreExplanation``, ``errorKind``, ``toolCalls``, ``durationMs``,
then one ``metadata.<field>`` column per metadata field any row has (missing: empty). With
``long=True`` (:func:`long_records`), one record per (dialogue, requirement) of its
referenceBasis: ``rowId``, ``outcome``, ``requirementId``, ``requirementStatus``, ``source``,
``category``, ``critical`` and the metadata columns.

Lists are lists in Parquet and JSON Lines and ``;``-joined text in CSV (a metadata value that
is a mapping is JSON text there). Parquet needs the optional extra
``rubric-engine[parquet]`` (pyarrow).

:func:`export_task` streams: the rows are read from the store a page at a time and each
record is written as it is made, so memory does not grow with the task (docs/scale.md). The
metadata columns are found first, in a pass over the stored dialogues alone. Parquet is written
in row groups of :data:`CHUNK` records; its column types are those pyarrow infers from the
values, so a task of more than one group is read twice: once to settle every column's type
over all groups, once to write. The file is written to a temporary name and renamed over
``out`` at the end.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from rubric_engine.errors import ConfigurationError
from rubric_engine.formats.csv_cells import text_cell
from rubric_engine.report.outcome import checked_pass_score, row_outcome
from rubric_engine.report.stored import ReportRow, check_row_count, stored_report_rows
from rubric_engine.results.model import RequirementStatus
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskStore, decode_column

ExportFormat = Literal["csv", "parquet", "jsonl"]
FORMATS: tuple[str, ...] = ("csv", "parquet", "jsonl")
Record = dict[str, Any]
WIDE_COLUMNS = (
    "rowId", "outcome", "status", "intentKey", "judgeScore", "finalScore", "cappedBy",
    "redFlagTypes", "violatedRequirementIds", "partialRequirementIds", "scoreExplanation",
    "errorKind", "toolCalls", "durationMs",
)  # fmt: skip
LONG_COLUMNS = (
    "rowId", "outcome", "requirementId", "requirementStatus", "source", "category", "critical",
)  # fmt: skip
#: records per Parquet row group (and per batch of CSV / JSON Lines text written): a batch of
#: 20,000 wide records held ~100 MB more at 100k rows (docs/scale.md)
CHUNK = 5_000


def check_format(fmt: str) -> None:
    """Raises: ConfigurationError: an unknown format (the valid ones listed)."""
    if fmt not in FORMATS:
        raise ConfigurationError(f"--format {fmt!r} is not valid; use one of {', '.join(FORMATS)}")


def export_task(
    store: TaskStore,
    task_id: str,
    fmt: str,
    out: Path,
    *,
    long: bool = False,
    pass_score: int | None = None,
) -> int:
    """Write a stored task's rows to ``out`` as ``fmt``; returns the records written.

    ``task_id`` is the task's id, name or ``tag:TAG``; the rows are read from the task's own
    rubric snapshot and rows, in input order (:func:`~rubric_engine.report.stored.load_task`
    for the checks).

    Raises:
        ConfigurationError: an unknown format, or Parquet without pyarrow (install
            ``rubric-engine[parquet]``), or a metadata field whose values have no one Parquet
            type (e.g. numbers in some rows, text in others).
        TaskNotFoundError / StoreError: as :func:`~rubric_engine.report.stored.load_task`.
        OSError: ``out`` cannot be written.
    """
    from rubric_engine.report.stored import task_rubric

    check_format(fmt)
    record, rubric = task_rubric(store, task_id)
    score = checked_pass_score(rubric, pass_score)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = metadata_fields(store, record.id)
    columns = [*(LONG_COLUMNS if long else WIDE_COLUMNS), *(f"metadata.{k}" for k in fields)]
    counted = [0]

    def records() -> Iterator[Record]:
        rows = _counted(stored_report_rows(store, record.id), counted)
        if long:
            yield from long_records(rows, fields, rubric, score)
        else:
            yield from wide_records(rows, fields, score)
        check_row_count(record, counted[0])

    if fmt == "parquet":
        return _write_parquet(records, columns, out)
    return _write_text(records(), columns, fmt, out)


def write_export(records: Sequence[Record], fmt: str, out: Path) -> None:
    """Write records already made (not a stored task's: :func:`export_task`) to ``out`` as
    ``fmt``, their columns in order of first appearance.

    Raises:
        ConfigurationError: as :func:`export_task`; ``out`` cannot be written (the operating
            system's reason; nothing was changed there).
    """
    from rubric_engine.report.render.output import check_output, unwritable

    check_format(fmt)
    check_output(out)
    columns = list(dict.fromkeys(k for r in records for k in r))
    try:
        if fmt == "parquet":
            _write_parquet(lambda: iter(records), columns, out)
        else:
            _write_text(records, columns, fmt, out)
    except OSError as exc:
        raise unwritable(out, "--out", exc) from exc


def _counted(rows: Iterable[ReportRow], counter: list[int]) -> Iterator[ReportRow]:
    counter[0] = 0
    for row in rows:
        counter[0] += 1
        yield row


def metadata_fields(store: TaskStore, task_id: str) -> list[str]:
    """Every metadata field of the task's rows, in order of first appearance (a pass over
    the stored dialogues)."""
    fields: dict[str, None] = {}
    for _, row_id, dialogue in store.select_rows(task_id, "dialogue"):
        metadata = decode_column(dialogue, f"task {task_id} row {row_id!r} dialogue")
        fields.update(dict.fromkeys(metadata.get("metadata") or ()))
    return list(fields)


def wide_records(rows: Iterable[ReportRow], fields: list[str], pass_score: int) -> Iterator[Record]:
    """One record per dialogue, in input order (see the module docstring for the columns)."""
    for row in rows:
        r = row.result
        basis = r.reference_basis
        record: Record = {
            "rowId": r.row_id,
            "outcome": row_outcome(r, pass_score),
            "status": str(r.status),
            "intentKey": r.intent_key,
            "judgeScore": r.judge_score,
            "finalScore": r.final_score,
            "cappedBy": list(r.capped_by),
            "redFlagTypes": list(r.red_flag_types),
            "violatedRequirementIds": [
                e.requirement_id for e in basis if e.status is RequirementStatus.VIOLATED
            ],
            "partialRequirementIds": [
                e.requirement_id for e in basis if e.status is RequirementStatus.PARTIAL
            ],
            "scoreExplanation": r.score_explanation,
            "errorKind": str(r.error.kind) if r.error else None,
            "toolCalls": row.facts.tool_calls,
            "durationMs": row.facts.duration_ms,
        }
        record.update({f"metadata.{k}": row.facts.metadata.get(k) for k in fields})
        yield record


def long_records(
    rows: Iterable[ReportRow], fields: list[str], rubric: EvalRubric, pass_score: int
) -> Iterator[Record]:
    """One record per (dialogue, referenceBasis entry); a JUDGE_ERROR row, which has no basis,
    gives one record with an empty requirement so that no row disappears."""
    requirements = rubric.requirements_by_id
    for row in rows:
        r = row.result
        outcome = row_outcome(r, pass_score)
        meta = {f"metadata.{k}": row.facts.metadata.get(k) for k in fields}
        entries = r.reference_basis or (None,)
        for e in entries:
            req = requirements.get(e.requirement_id) if e is not None else None
            yield {
                "rowId": r.row_id,
                "outcome": outcome,
                "requirementId": e.requirement_id if e else None,
                "requirementStatus": str(e.status) if e else None,
                "source": str(e.source) if e else None,
                "category": str(req.category) if req else ("CASE" if e else None),
                "critical": bool(req.critical) if req else (False if e else None),
                **meta,
            }


def _csv_cell(value: Any) -> Any:
    """A cell: lists ``;``-joined, objects as JSON, text a spreadsheet would run as a formula
    escaped (:func:`~rubric_engine.formats.csv_cells.text_cell`)."""
    if isinstance(value, list):
        value = ";".join(str(v) for v in value)
    elif isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str):
        return text_cell(value)
    return "" if value is None else value


def _write_text(records: Iterable[Record], columns: list[str], fmt: str, out: Path) -> int:
    """CSV or JSON Lines, written a batch of records at a time through a temporary file."""
    from rubric_engine.report.render.output import write_atomic

    written = [0]

    def chunks() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns) if fmt == "csv" else None
        if writer is not None:
            writer.writeheader()
        for n, r in enumerate(records, start=1):
            if writer is None:
                buffer.write(json.dumps(r, ensure_ascii=False) + "\n")
            else:
                writer.writerow({k: _csv_cell(r.get(k)) for k in columns})
            written[0] = n
            if n % CHUNK == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()

    newline = None if fmt == "jsonl" else ""  # csv writes its own \r\n line ends
    write_atomic(out, chunks(), newline=newline)
    return written[0]


def _write_parquet(records: Callable[[], Iterator[Record]], columns: list[str], out: Path) -> int:
    """Parquet in row groups of :data:`CHUNK` records (see the module docstring).

    ``records`` makes the record stream afresh on each call."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigurationError(
            "--format parquet needs pyarrow, the parquet extra: pip install "
            "'rubric-engine[parquet]' (from a clone of the repository: pip install -e "
            "'.[parquet]'); --format csv and jsonl need nothing more"
        ) from exc
    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    written = 0
    try:
        only, schema = _only_group_or_schema(_groups(records(), columns), columns)
        if only is not None:  # one group: its own types
            pq.write_table(only, temp)
            written = only.num_rows
        else:
            with pq.ParquetWriter(temp, schema) as writer:
                for group in _groups(records(), columns):
                    writer.write_table(group.cast(schema))
                    written += group.num_rows
        os.replace(temp, out)
    finally:
        temp.unlink(missing_ok=True)
    return written


def _only_group_or_schema(groups: Iterator[Any], columns: list[str]) -> tuple[Any, Any]:
    """``(the group, None)`` for a task of one group (no rows: an empty one); else ``(None,
    the schema unified over every group's)``, with no group kept once its schema is read."""
    import pyarrow as pa

    first = next(groups, None)
    if first is None:  # no rows: the columns with no values, as pyarrow reads them
        return pa.table({k: [] for k in columns}), None
    following = next(groups, None)
    if following is None:
        return first, None
    schemas = [first.schema, following.schema]
    del first, following  # a group is CHUNK records: keep the schemas only
    schemas += (g.schema for g in groups)
    return None, _unified(schemas)


def _groups(records: Iterable[Record], columns: list[str]) -> Iterator[Any]:
    """Arrow tables of :data:`CHUNK` records each, every column's type inferred from its values
    (a mapping in metadata as JSON text: it has no single Arrow type across rows)."""
    import pyarrow as pa

    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == CHUNK:
            yield _table(pa, chunk, columns)
            chunk = []
    if chunk:
        yield _table(pa, chunk, columns)


def _table(pa: Any, chunk: list[Record], columns: list[str]) -> Any:
    data = {}
    for k in columns:
        try:
            data[k] = pa.array([_parquet_cell(r.get(k)) for r in chunk])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise _mixed(k, exc) from exc
    return pa.table(data)


def _unified(schemas: list[Any]) -> Any:
    import pyarrow as pa

    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        names = [f.name for f in schemas[0]]
        differs = [n for n in names if len({str(s.field(n).type) for s in schemas}) > 1]
        raise _mixed(differs[0] if differs else "?", exc) from exc


def _mixed(column: str, exc: Exception) -> ConfigurationError:
    return ConfigurationError(
        f"column {column!r} holds values of different kinds across rows ({exc}); Parquet needs "
        "one type per column: export --format csv or jsonl instead"
    )


def _parquet_cell(value: Any) -> Any:
    # a mapping in metadata has no single Arrow type across rows: keep it as JSON text
    return (
        json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, dict) else value
    )
