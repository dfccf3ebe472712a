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
``rubric-engine[parquet]`` (pyarrow). Pure except :func:`write_export`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from rubric_engine.errors import ConfigurationError
from rubric_engine.report.outcome import row_outcome
from rubric_engine.report.stored import StoredTask
from rubric_engine.results.model import RequirementStatus

ExportFormat = Literal["csv", "parquet", "jsonl"]
FORMATS: tuple[str, ...] = ("csv", "parquet", "jsonl")
Record = dict[str, Any]


def _metadata_fields(task: StoredTask) -> list[str]:
    return list(dict.fromkeys(k for row in task.rows for k in row.facts.metadata))


def wide_records(task: StoredTask, pass_score: int) -> list[Record]:
    """One record per dialogue, in input order (see the module docstring for the columns)."""
    fields = _metadata_fields(task)
    out = []
    for row in task.rows:
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
        out.append(record)
    return out


def long_records(task: StoredTask, pass_score: int) -> list[Record]:
    """One record per (dialogue, referenceBasis entry); a JUDGE_ERROR row, which has no basis,
    gives one record with an empty requirement so that no row disappears."""
    fields = _metadata_fields(task)
    requirements = task.rubric.requirements_by_id
    out = []
    for row in task.rows:
        r = row.result
        meta = {f"metadata.{k}": row.facts.metadata.get(k) for k in fields}
        entries = r.reference_basis or (None,)
        for e in entries:
            req = requirements.get(e.requirement_id) if e is not None else None
            out.append({
                "rowId": r.row_id,
                "outcome": row_outcome(r, pass_score),
                "requirementId": e.requirement_id if e else None,
                "requirementStatus": str(e.status) if e else None,
                "source": str(e.source) if e else None,
                "category": str(req.category) if req else ("CASE" if e else None),
                "critical": bool(req.critical) if req else (False if e else None),
                **meta,
            })  # fmt: skip
    return out


#: a text cell starting with one of these is a formula to a spreadsheet (OWASP's CSV
#: injection rule): it gets a leading ``'``, which spreadsheets show as text
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    if isinstance(value, list):
        value = ";".join(str(v) for v in value)
    elif isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def write_export(records: Sequence[Record], fmt: str, out: Path) -> None:
    """Write ``records`` to ``out`` as ``fmt``.

    Raises:
        ConfigurationError: an unknown format (the valid ones listed), or Parquet without
            pyarrow (install ``rubric-engine[parquet]``).
    """
    if fmt not in FORMATS:
        raise ConfigurationError(f"--format {fmt!r} is not valid; use one of {', '.join(FORMATS)}")
    from rubric_engine.report.render.output import write_output

    columns = list(dict.fromkeys(k for r in records for k in r))
    if fmt == "jsonl":
        write_output(out, (json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    elif fmt == "csv":
        write_output(out, _csv_lines(records, columns))
    else:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ConfigurationError(
                "--format parquet needs pyarrow: pip install 'rubric-engine[parquet]'"
            ) from exc
        data = {k: [_parquet_cell(r.get(k)) for r in records] for k in columns}
        _write_parquet(pa.table(data), pq, out)


def _csv_lines(records: Sequence[Record], columns: list[str]) -> Iterator[str]:
    """The CSV text, a line at a time (as ``csv.DictWriter`` writes it)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    for r in records:
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        writer.writerow({k: _csv_cell(r.get(k)) for k in columns})
    yield buffer.getvalue()


def _write_parquet(table: Any, pq: Any, out: Path) -> None:
    """The Parquet file written beside ``out`` and renamed over it (never half a file)."""
    import os
    import tempfile

    from rubric_engine.report.render.output import check_output, unwritable

    check_output(out)
    try:
        handle, temp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        os.close(handle)
        try:
            pq.write_table(table, temp)
            os.replace(temp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise unwritable(out, "--out", exc) from exc


def _parquet_cell(value: Any) -> Any:
    # a mapping in metadata has no single Arrow type across rows: keep it as JSON text
    return (
        json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, dict) else value
    )
