"""The report package's store edge: reports rebuilt from a stored task, never from current files
(docs/rubric-packs.md, §9).

:func:`report_for_task` reads the task's own rubric snapshot and rows from the store and
aggregates them a row at a time (:func:`stream_report`; :func:`load_task` keeps every row, for
the readers that need them: diffs, review, calibration, export); :func:`write_reports` writes
``report.json``, ``report.md``, ``report.html`` and ``rows.jsonl``; :func:`with_calibration`
attaches the calibration pinned to the task (for the gate and the md/html section; a rubric
never calibrated changes no byte). The same task always gives the same bytes. This is the only
module of :mod:`rubric_engine.report` that reads the store or writes files; the rest is pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import StoreError
from rubric_engine.report.accumulate import ReportAccumulator, WorstRows
from rubric_engine.report.aggregate import build_report
from rubric_engine.report.model import CalibrationSection, Report, TaskSection
from rubric_engine.report.render.json_md import json_chunks, render_markdown
from rubric_engine.report.rows import RowFacts, RowUsage, row_facts
from rubric_engine.report.scratch_tables import ScratchTables
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.versions import verified_snapshot
from rubric_engine.store.task_ref import resolve_in_store
from rubric_engine.store.task_store import (
    RESULT_JSON_START,
    StoredRow,
    TaskRecord,
    TaskStore,
    decode_column,
    parse_result,
    result_json,
)

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
        # a panel's models (extra.sampling.judges, docs/panels.md)
        judges=tuple((extra.get("sampling") or {}).get("judges") or ()) or None,
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
    return ReportRow(stored.result, row_usage(stored), row_facts(stored.dialogue))


def row_usage(stored: StoredRow) -> RowUsage:
    """A stored row's judge usage, as reports read it."""
    return RowUsage(
        stored.calls,
        stored.prompt_tokens,
        stored.completion_tokens,
        stored.cost_usd,
        stored.latency_ms,
        stored.cache_read_tokens,
        stored.cache_creation_tokens,
    )


def add_stored(accumulator: ReportAccumulator, stored: StoredRow) -> None:
    """Add a row just stored (a fresh run's rows, as they finish) to ``accumulator``: what
    :func:`report_row` reads of it, without that object (the row is its own usage: it has
    :class:`~rubric_engine.report.rows.RowUsage`'s fields, read and not kept)."""
    accumulator.add(stored.seq, stored.result, stored, row_facts(stored.dialogue))


def load_task(store: TaskStore, task_id: str) -> StoredTask:
    """Read a task, parse its rubric snapshot and load its rows in input order.

    ``task_id`` may also be the task's name or ``tag:TAG`` (:mod:`rubric_engine.store.task_ref`), so
    every command that loads a task takes one; the loaded record carries the real id.

    The task's rubric snapshot is checked against the content hash recorded when the task ran
    (docs/rubric-packs.md): a report is never rebuilt from rules edited afterwards.

    Raises:
        TaskNotFoundError: no such task.
        StoreError: the stored snapshot no longer validates or no longer matches its hash; a
            COMPLETED task does not hold exactly its planned rows (rows were deleted or added).
    """
    record, rubric = task_rubric(store, task_id)
    rows = list(stored_report_rows(store, record.id))
    check_row_count(record, len(rows))
    return StoredTask(record, rubric, rows)


def task_rubric(store: TaskStore, task_id: str) -> tuple[TaskRecord, EvalRubric]:
    """A task's record and its own rubric snapshot, checked against the snapshot's hash
    (see :func:`load_task` for ``task_id`` and the errors); no row is read."""
    task_id = resolve_in_store(store, task_id)
    record = store.task(task_id)
    rubric = verified_snapshot(record.rubric_snapshot, record.rubric_hash, f"task {task_id}")
    return record, rubric


def check_row_count(record: TaskRecord, stored: int) -> None:
    """Raises: StoreError: more rows than planned, or a COMPLETED task without exactly its
    planned rows (rows were deleted or added after the run)."""
    if stored > record.row_count or (record.state == "COMPLETED" and stored != record.row_count):
        raise StoreError(
            f"task {record.id} is {record.state} with {record.row_count} planned row(s) but the "
            f"store holds {stored}: rows were deleted or added after the run. The report is "
            "not rebuilt from a damaged task; restore the store from a backup or score again."
        )


@dataclass(frozen=True)
class StreamedTask:
    """A task whose report was built in one pass over its rows, one row at a time:
    what the report files need besides the report, and no row list.

    Attributes:
        drilldown: the rows the HTML drill-down shows (at most
            :data:`~rubric_engine.report.accumulate.DRILLDOWN_ROWS`, input order), picked at
            the report's pass score.
        stored_rows: how many rows the task holds.
    """

    record: TaskRecord
    rubric: EvalRubric
    report: Report
    drilldown: list[RowResult]
    stored_rows: int


def stream_report(
    store: TaskStore,
    task_id: str,
    *,
    pass_score: int | None = None,
    by: tuple[str, ...] = (),
    exact: bool = False,
) -> StreamedTask:
    """Rebuild a task's report from the store, reading its rows one at a time: memory holds
    the report's counters and bounded heaps, not the rows (see :func:`load_task` for
    ``task_id``, the snapshot check and the errors; :func:`build_report` for the options)."""
    record, rubric = task_rubric(store, task_id)
    built = ReportAccumulator(
        rubric, pass_score=pass_score, by=by, exact=exact, storage=ScratchTables()
    )
    for seq, row in enumerate(stored_report_rows(store, record.id)):
        built.add(seq, row.result, row.usage, row.facts)
    check_row_count(record, built.rows)
    return streamed_task(record, rubric, built)


def stored_report_rows(store: TaskStore, task_id: str) -> Iterator[ReportRow]:
    """The task's rows as reports read them, in input order, one at a time."""
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
    ) in store.report_rows(task_id):
        usage = RowUsage(calls, prompt, completion, cost, latency, cache_read, cache_creation)
        yield ReportRow(result, usage, row_facts(dialogue))


def streamed_task(record: TaskRecord, rubric: EvalRubric, built: ReportAccumulator) -> StreamedTask:
    """The report of the rows ``built`` was fed (a fresh run feeds each row as it is stored);
    ``built`` is released (:meth:`~rubric_engine.report.accumulate.ReportAccumulator.release`)."""
    report = with_unrowed_calls(built.finish(task_section(record)), record)
    built.release()  # the report files are written without the per-row data
    return StreamedTask(record, rubric, report, built.worst.rows(), built.rows)


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
    return with_unrowed_calls(report, task.record)


def with_unrowed_calls(report: Report, record: TaskRecord) -> Report:
    """What the runs counted beside the stored rows, added to ``usage``: requests sent for rows
    that were cut off (Ctrl-C, a stop) and so are in no row (``callsNotInRows``: every
    request the provider received is a call), the tokens and cost of those that were answered
    (``usageNotInRows``), the calls and tokens held for rows not stored yet, which a resumed
    run puts into those rows without asking again (``usageHeld``, docs/stability.md
    "Resume"), and the reasoning tokens of every answered call (``reasoningTokens``)."""
    extra = record.extra
    unrowed = int(extra.get("callsNotInRows") or 0)
    lost = extra.get("usageNotInRows") or {}
    held = extra.get("usageHeld") or {}
    reasoning = int(extra.get("reasoningTokens") or 0)
    if not (unrowed or lost or reasoning or any(held.values())):
        return report
    usage = report.usage
    update: dict[str, Any] = {
        "calls": usage.calls + unrowed + int(held.get("calls") or 0),
        "prompt_tokens": usage.prompt_tokens
        + int(lost.get("promptTokens") or 0)
        + int(held.get("promptTokens") or 0),
        "completion_tokens": usage.completion_tokens
        + int(lost.get("completionTokens") or 0)
        + int(held.get("completionTokens") or 0),
    }
    if lost.get("costUsd") or held.get("costUsd"):
        update["cost_usd"] = (
            (usage.cost_usd or 0.0)
            + float(lost.get("costUsd") or 0.0)
            + float(held.get("costUsd") or 0.0)
        )
    if reasoning:
        update["reasoning_tokens"] = reasoning
    return report.model_copy(update={"usage": usage.model_copy(update=update)})


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
    return stream_report(store, task_id, pass_score=pass_score, by=by).report


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
    task: StoredTask | StreamedTask | None = None,
) -> ReportFiles:
    """Write ``report.json``, ``report.md``, ``report.html`` (self-contained) and ``rows.jsonl``
    (one row object per line) as one set: all are written before any replaces the folder's
    old ones (:func:`~rubric_engine.report.render.output.write_report_files`).

    Raises:
        ConfigurationError: ``out`` cannot hold the files
            (:func:`rubric_engine.report.render.output.check_report_folder`).
        OSError: writing failed all the same (a full disk).

    Args:
        task: the task as :func:`load_task` or :func:`stream_report` already read it, so
            the report is not built twice; rows.jsonl of a streamed task is read from the
            store a row at a time.
    """
    from rubric_engine.report.render.output import check_report_folder, write_report_files

    if task is None:
        task = stream_report(store, task_id, pass_score=report.totals.pass_score)
    report = with_calibration(store, task, report)
    check_report_folder(out)
    files = ReportFiles(
        out / "report.json", out / "report.md", out / "rows.jsonl", out / "report.html"
    )
    # rows.jsonl first and report.json last: a report.json present means the set is whole;
    # in chunks: rows.jsonl and the page list every row or low row, so neither is held whole
    write_report_files(
        out,
        [
            (files.rows.name, rows_jsonl(store, task.record.id, report.totals.pass_score)),
            (files.markdown.name, render_markdown(report)),
            (files.html.name, html_report_chunks(store, task, report)),
            (files.json.name, json_chunks(report)),
        ],
    )
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
    ``dialogue`` columns: ``json.dumps(rows_line(...), ensure_ascii=False)`` without
    validating the result again (the pass rule reads only a few of its fields).

    Raises:
        StoreError: a column is not valid JSON or not a valid result (edited by hand).
    """
    from rubric_engine.report.outcome import outcome_of

    if not result.startswith(RESULT_JSON_START):  # a store written in the older canonical form
        result = result_json(parse_result(result, task_id))
    line = decode_column(result, f"task {task_id} row result")
    rules = line.get("rules")
    line["outcome"] = outcome_of(
        RowStatus(line["status"]),
        line.get("finalScore"),
        bool(line.get("redFlagTypes")),
        rules["passed"] if rules else None,
        pass_score,
    )
    metadata = decode_column(dialogue, f"task {task_id} row dialogue").get("metadata") or {}
    # keys sorted at every depth, as rows_line writes them
    line["metadata"] = json.loads(json.dumps(metadata, sort_keys=True))
    return json.dumps(line, ensure_ascii=False) + "\n"


def diff_side(task: StoredTask, *, pass_score: int | None = None, exact: bool = True) -> DiffSide:
    """What :func:`rubric_engine.report.diff.diff_tasks` reads of one task: its report with
    exact figures (the diff decides on them and rounds what it shows)."""
    from rubric_engine.report.diff import DiffSide

    report = report_from_task(task, pass_score=pass_score, exact=exact)
    return DiffSide(report, task.rubric, [(r.result, r.facts) for r in task.rows])


def html_report(
    store: TaskStore,
    task: StoredTask | StreamedTask,
    report: Report,
    review_url: str | None = None,
) -> str:
    """The self-contained HTML report; its drill-down holds at most
    :data:`~rubric_engine.report.accumulate.DRILLDOWN_ROWS` rows (worst first), their dialogues
    fetched from the store (only theirs); with ``review_url`` each links to its review page."""
    return "".join(html_report_chunks(store, task, report, review_url))


def html_report_chunks(
    store: TaskStore,
    task: StoredTask | StreamedTask,
    report: Report,
    review_url: str | None = None,
) -> Iterator[str]:
    """:func:`html_report`'s text in chunks, to write without holding the page."""
    from rubric_engine.report.render.html import drilldown_rows, html_chunks

    report = with_calibration(store, task, report)
    pass_score = report.totals.pass_score
    if isinstance(task, StoredTask):
        picked = drilldown_rows([r.result for r in task.rows], pass_score)
        total = len(task.rows)
    elif task.report.totals.pass_score == pass_score:
        picked, total = task.drilldown, task.stored_rows
    else:  # a report at another pass score than the streamed one: pick again, a row at a time
        worst = WorstRows(pass_score)
        for seq, row in enumerate(stored_report_rows(store, task.record.id)):
            worst.add(seq, row.result)
        picked, total = worst.rows(), task.stored_rows
    dialogues = store.dialogues(task.record.id, [r.row_id for r in picked])
    pairs = [(r, dialogues.get(r.row_id, {})) for r in picked]
    trend, left_out = name_trend_svgs(store, task.record, report)
    return html_chunks(
        report,
        task.rubric,
        pairs,
        total_rows=total,
        review_url=review_url,
        trend_svgs=trend,
        trend_left_out=left_out,
    )


#: how many earlier tasks of a name the report's trend chart reads (each is streamed again)
TREND_TASKS = 9


def name_trend_svgs(
    store: TaskStore, record: TaskRecord, report: Report
) -> tuple[tuple[str, ...], list[str]]:
    """Mean score and pass rate of the task's name over its last :data:`TREND_TASKS` earlier
    tasks and this one, as SVG charts (none for a task without a name or the first of it),
    and a line for each earlier task left out of them: one whose stored rows cannot be read
    (a failed digest check, say) is named with the reason, so it cannot stop this task's
    own report."""
    from rubric_engine.report.render.trend_svg import trend_svg
    from rubric_engine.report.trend import build_trend
    from rubric_engine.store.task_ref import task_name

    name = task_name(record.extra)
    if name is None:
        return (), []
    before = (record.created_at, record.id)
    named = [t for t in store.tasks() if task_name(t.extra) == name]
    earlier = [t for t in named if (t.created_at, t.id) < before][-TREND_TASKS:]
    tasks, left_out = [], []
    for t in earlier:
        try:
            tasks.append((t.id, t.id, t.prompt_version, stream_report(store, t.id).report))
        except StoreError as e:
            left_out.append(f"task {t.id}: {e}")
    if not tasks:
        return (), left_out
    tasks.append((record.id, record.id, record.prompt_version, report))
    trend = build_trend(name, tasks, ("meanScore", "passRate"))
    return tuple(trend_svg(trend, metric) for metric in trend.metrics), left_out


def task_calibration(store: TaskStore, task: TaskRecord) -> CalibrationSection:
    """The calibration the task may use, read from its store: current, stale (the pins that
    differ named) or missing (how to make one). Reading creates no table."""
    from rubric_engine.calibration.record import calibration_metrics
    from rubric_engine.report.calibration import calibration_section

    found = calibration_metrics(task, store.backend)
    return calibration_section(found.state, found.reason, found.metrics, found.record_id)


def with_calibration(store: TaskStore, task: StoredTask | StreamedTask, report: Report) -> Report:
    """The report with the task's calibration attached (unchanged when one already is)."""
    if report.calibration is not None:
        return report
    return report.model_copy(update={"calibration": task_calibration(store, task.record)})
