"""The report package's store edge: reports rebuilt from a stored task, never from current files
(SPEC §3, §9).

:func:`report_for_task` reads the task's own rubric snapshot and rows from the store and
aggregates them; :func:`write_reports` writes ``report.json``, ``report.md``, ``report.html``
and ``rows.jsonl``; :func:`with_calibration` attaches the calibration pinned to the task (for
the gate and the md/html section; a rubric never calibrated changes no byte). The same task
always gives the same bytes. This is the only module of :mod:`rubric_engine.report` that reads
the store or writes files; the rest is pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import StoreError
from rubric_engine.registry import verified_snapshot
from rubric_engine.report.aggregate import build_report
from rubric_engine.report.model import CalibrationSection, Report, TaskSection
from rubric_engine.report.render import render_json, render_markdown
from rubric_engine.report.rows import RowFacts, RowUsage, row_facts
from rubric_engine.results import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store import (
    RESULT_JSON_START,
    StoredRow,
    TaskRecord,
    TaskStore,
    decode_column,
    parse_result,
    result_json,
)
from rubric_engine.task_ref import resolve_in_store

if TYPE_CHECKING:
    from rubric_engine.report.diff import DiffSide


def task_section(task: TaskRecord) -> TaskSection:
    """The report's ``task`` block: identity and every version that made the scores."""
    extra = task.extra
    return TaskSection(
        id=task.id,
        created_at=task.created_at,
        state=task.state,
        rubric_key=task.rubric_key,
        rubric_version=task.rubric_version,
        rubric_status=task.rubric_status,
        rubric_hash=task.rubric_hash,
        prompt_version=task.prompt_version,
        prompt_hash=task.prompt_hash,
        engine_version=task.engine_version,
        analysis_version=task.analysis_version,
        model=task.model,
        judge_mode=task.judge_mode,
        judge_params=task.judge_params,
        inputs=tuple(task.inputs),
        planned_rows=task.row_count,
        cassettes=extra.get("cassettes"),
        answer_sources=tuple(extra["answerSources"]) if extra.get("answerSources") else None,
        stop_reason=extra.get("stopReason"),
        renormalized_from=extra.get("renormalizedFrom"),
        judged_under=extra.get("judgedUnder"),
        latency=extra.get("latency"),
        output_form=extra.get("outputForm"),
    )


@dataclass(frozen=True)
class StoredTask:
    """A task read back from the store: its record, its own rubric snapshot and its rows."""

    record: TaskRecord
    rubric: EvalRubric
    rows: list[ReportRow]


@dataclass(frozen=True)
class ReportRow:
    """One row as reports read it: the result, what the judge calls cost, what the agent did.
    Dialogues and raw judge replies stay in the store (the HTML drill-down fetches a few)."""

    result: RowResult
    usage: RowUsage
    facts: RowFacts


def report_row(stored: StoredRow) -> ReportRow:
    """What reports keep of a stored row."""
    usage = RowUsage(
        stored.calls,
        stored.prompt_tokens,
        stored.completion_tokens,
        stored.cost_usd,
        stored.latency_ms,
        stored.cache_read_tokens,
        stored.cache_creation_tokens,
    )
    return ReportRow(stored.result, usage, row_facts(stored.dialogue))


def load_task(store: TaskStore, task_id: str) -> StoredTask:
    """Read a task, parse its rubric snapshot and load its rows in input order.

    ``task_id`` may also be the task's name or ``tag:TAG`` (:mod:`rubric_engine.task_ref`), so
    every command that loads a task takes one; the loaded record carries the real id.

    The task's rubric snapshot is checked against the content hash recorded when the task ran
    (SPEC §3): a report is never rebuilt from rules edited afterwards.

    Raises:
        TaskNotFoundError: no such task.
        StoreError: the stored snapshot no longer validates or no longer matches its hash; a
            COMPLETED task does not hold exactly its planned rows (rows were deleted or added).
    """
    task_id = resolve_in_store(store, task_id)
    record = store.task(task_id)
    rubric = verified_snapshot(record.rubric_snapshot, record.rubric_hash, f"task {task_id}")
    rows = [
        ReportRow(
            result,
            RowUsage(calls, prompt, completion, cost, latency, cache_read, cache_creation),
            row_facts(dialogue),
        )
        for (
            result,
            calls,
            prompt,
            completion,
            cost,
            latency,
            dialogue,
            cache_read,
            cache_creation,
        ) in store.report_rows(task_id)
    ]
    if len(rows) > record.row_count or (
        record.state == "COMPLETED" and len(rows) != record.row_count
    ):
        raise StoreError(
            f"task {task_id} is {record.state} with {record.row_count} planned row(s) but the "
            f"store holds {len(rows)}: rows were deleted or added after the run. The report is "
            "not rebuilt from a damaged task; restore the store from a backup or score again."
        )
    return StoredTask(record, rubric, rows)


def report_from_task(
    task: StoredTask,
    *,
    pass_score: int | None = None,
    by: tuple[str, ...] = (),
    exact: bool = False,
) -> Report:
    """The report of an already loaded task (see :func:`build_report` for the options)."""
    rows = ((row.result, row.usage, row.facts) for row in task.rows)
    report = build_report(
        task_section(task.record), task.rubric, rows, pass_score=pass_score, by=by, exact=exact
    )
    # requests sent for rows that were cut off (Ctrl-C, a stop) and so are in no row: every
    # request the provider received is a call (issue 14)
    unrowed = int(task.record.extra.get("callsNotInRows") or 0)
    if unrowed:
        usage = report.usage.model_copy(update={"calls": report.usage.calls + unrowed})
        report = report.model_copy(update={"usage": usage})
    return report


def report_for_task(
    store: TaskStore, task_id: str, *, pass_score: int | None = None, by: tuple[str, ...] = ()
) -> Report:
    """Rebuild a task's report from the store alone.

    Args:
        pass_score: lowest passing final score (default: one below the scale's top).
        by: slices to add (``intent``, ``category`` or a row metadata field).

    Raises:
        TaskNotFoundError: no such task.
        StoreError: the stored snapshot no longer validates or no longer matches its hash.
        ConfigurationError: a bad ``pass_score`` or ``by`` name (valid choices listed).
    """
    return report_from_task(load_task(store, task_id), pass_score=pass_score, by=by)


@dataclass(frozen=True)
class ReportFiles:
    json: Path
    markdown: Path
    rows: Path
    html: Path


def write_reports(
    store: TaskStore,
    task_id: str,
    report: Report,
    out: Path,
    task: StoredTask | None = None,
) -> ReportFiles:
    """Write ``report.json``, ``report.md``, ``report.html`` (self-contained) and ``rows.jsonl``
    (one row object per line), each atomically (a temporary file renamed over it).

    Raises:
        ConfigurationError: ``out`` cannot hold the files
            (:func:`rubric_engine.report.output.check_report_folder`).
        OSError: writing failed all the same (a full disk).

    Args:
        task: the task as :func:`load_task` already read it, so it is not read twice.
    """
    from rubric_engine.report.output import check_report_folder, write_atomic

    task = task if task is not None else load_task(store, task_id)
    report = with_calibration(store, task, report)
    check_report_folder(out)
    files = ReportFiles(
        out / "report.json", out / "report.md", out / "rows.jsonl", out / "report.html"
    )
    # rows.jsonl first and report.json last: a report.json present means the set is whole
    write_atomic(files.rows, rows_jsonl(store, task.record.id, report.totals.pass_score))
    write_atomic(files.markdown, render_markdown(report))
    write_atomic(files.html, html_report(store, task, report))
    write_atomic(files.json, render_json(report))
    return files


def rows_line(row: ReportRow, pass_score: int) -> dict[str, Any]:
    """One ``rows.jsonl`` object: the row result, then its ``outcome`` (PASS / FAIL / RED_FLAG /
    JUDGE_ERROR by the report's pass rule, report/outcome.py) and the row's ``metadata``, so
    an analyst need not re-implement the pass rule or join the input back."""
    from rubric_engine.report.outcome import row_outcome

    line = row.result.to_json_dict()
    line["outcome"] = row_outcome(row.result, pass_score)
    # keys sorted at every depth: a fresh run's rows and the store's copy give the same bytes
    line["metadata"] = json.loads(json.dumps(row.facts.metadata, sort_keys=True))
    return line


def rows_jsonl(store: TaskStore, task_id: str, pass_score: int) -> Iterator[str]:
    """``rows.jsonl``'s lines (each ending in a newline), read from the store one row at a time
    in input order: memory does not grow with the rows."""
    for result, dialogue in store.result_texts(task_id):
        yield rows_jsonl_line(result, dialogue, pass_score, task_id)


def rows_jsonl_line(result: str, dialogue: str, pass_score: int, task_id: str = "") -> str:
    """The :func:`rows_line` of a stored row, as text, from its stored ``result`` and
    ``dialogue`` columns: the result's own stored bytes
    (:func:`~rubric_engine.store.result_json`) with ``outcome`` and the sorted ``metadata``
    added, so the line is byte for byte ``json.dumps(rows_line(...), ensure_ascii=False)``
    without building the result again.

    Raises:
        StoreError: a column is not valid JSON or not a valid result (edited by hand).
    """
    from rubric_engine.report.outcome import outcome_of

    if not result.startswith(RESULT_JSON_START):  # a store written before issue 18
        result = result_json(parse_result(result, task_id))
    data = decode_column(result, f"task {task_id} row result")
    rules = data.get("rules")
    # the fields the pass rule reads (report/outcome.py), without validating the whole result
    outcome = outcome_of(
        RowStatus(data["status"]),
        data.get("finalScore"),
        bool(data.get("redFlagTypes")),
        rules["passed"] if rules else None,
        pass_score,
    )
    metadata = decode_column(dialogue, f"task {task_id} row dialogue").get("metadata") or {}
    return (
        f'{result[:-1]}, "outcome": {json.dumps(outcome)}, '
        f'"metadata": {json.dumps(metadata, sort_keys=True, ensure_ascii=False)}}}\n'
    )


def diff_side(task: StoredTask, *, pass_score: int | None = None, exact: bool = True) -> DiffSide:
    """What :func:`rubric_engine.report.diff.diff_tasks` reads of one task: its report with
    exact figures (the diff decides on them and rounds what it shows)."""
    from rubric_engine.report.diff import DiffSide

    report = report_from_task(task, pass_score=pass_score, exact=exact)
    return DiffSide(report, task.rubric, [(r.result, r.facts) for r in task.rows])


def html_report(store: TaskStore, task: StoredTask, report: Report) -> str:
    """The self-contained HTML report; its drill-down holds at most
    :data:`~rubric_engine.report.html.DRILLDOWN_ROWS` rows (worst first), fetched from the store."""
    from rubric_engine.report.html import drilldown_rows, render_html

    report = with_calibration(store, task, report)
    picked = drilldown_rows([r.result for r in task.rows], report.totals.pass_score)
    dialogues = store.dialogues(task.record.id, [r.row_id for r in picked])
    pairs = [(r, dialogues.get(r.row_id, {})) for r in picked]
    return render_html(report, task.rubric, pairs, total_rows=len(task.rows))


def task_calibration(store: TaskStore, task: TaskRecord) -> CalibrationSection:
    """The calibration the task may use, read from its store: current, stale (the pins that
    differ named) or missing (how to make one). Reading creates no table."""
    from rubric_engine.calibration.record import calibration_metrics
    from rubric_engine.report.calibration import calibration_section

    found = calibration_metrics(task, store.backend)
    return calibration_section(found.state, found.reason, found.metrics, found.record_id)


def with_calibration(store: TaskStore, task: StoredTask, report: Report) -> Report:
    """The report with the task's calibration attached (unchanged when one already is)."""
    if report.calibration is not None:
        return report
    return report.model_copy(update={"calibration": task_calibration(store, task.record)})
