"""Reports rebuilt from a stored task, never from current files (SPEC §3, §9).

:func:`report_for_task` reads the task's own rubric snapshot and rows from the store and
aggregates them; :func:`write_reports` writes ``report.json``, ``report.md`` and ``rows.jsonl``.
The same task always gives the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_engine.registry import verified_snapshot
from rubric_engine.report.aggregate import RowUsage, build_report
from rubric_engine.report.render import render_json, render_markdown
from rubric_engine.store import TaskRecord, TaskStore


def task_section(task: TaskRecord) -> dict[str, Any]:
    """The report's ``task`` block: identity and every version that made the scores."""
    section: dict[str, Any] = {
        "id": task.id,
        "createdAt": task.created_at,
        "state": task.state,
        "rubricKey": task.rubric_key,
        "rubricVersion": task.rubric_version,
        "rubricStatus": task.rubric_status,
        "rubricHash": task.rubric_hash,
        "promptVersion": task.prompt_version,
        "promptHash": task.prompt_hash,
        "engineVersion": task.engine_version,
        "analysisVersion": task.analysis_version,
        "model": task.model,
        "judgeMode": task.judge_mode,
        "judgeParams": task.judge_params,
        "inputs": task.inputs,
        "plannedRows": task.row_count,
    }
    if "cassettes" in task.extra:
        section["cassettes"] = task.extra["cassettes"]
    return section


def report_for_task(store: TaskStore, task_id: str) -> dict[str, Any]:
    """Rebuild a task's report from the store alone.

    The task's rubric snapshot is checked against the content hash recorded when the task ran
    (SPEC §3): a report is never rebuilt from rules edited afterwards.

    Raises:
        TaskNotFoundError: no such task.
        StoreError: the stored snapshot no longer validates or no longer matches its hash.
    """
    task = store.task(task_id)
    rubric = verified_snapshot(task.rubric_snapshot, task.rubric_hash, f"task {task_id}")
    rows = (
        (result, RowUsage(calls, prompt, completion, cost, latency))
        for result, calls, prompt, completion, cost, latency in store.results(task_id)
    )
    return build_report(task_section(task), rubric, rows)


@dataclass(frozen=True)
class ReportFiles:
    json: Path
    markdown: Path
    rows: Path


def write_reports(store: TaskStore, task_id: str, report: dict[str, Any], out: Path) -> ReportFiles:
    """Write ``report.json``, ``report.md`` and ``rows.jsonl`` (one row object per line)."""
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out / "report.json", out / "report.md", out / "rows.jsonl")
    files.json.write_text(render_json(report), encoding="utf-8")
    files.markdown.write_text(render_markdown(report), encoding="utf-8")
    with files.rows.open("w", encoding="utf-8") as handle:
        for result, *_ in store.results(task_id):
            handle.write(json.dumps(result.to_json_dict(), ensure_ascii=False) + "\n")
    return files
