"""Calibration records, pinned to what they were measured under (docs/calibration.md
"Pinned calibration and the gate").

A record keeps the rubric key, version and content hash, the prompt version and hash, the
judge model and its parameters, the task it was measured on, which labels were used (the
*selection*: which reviewers, the store's labels or a file, whether labels of changed
requirements were let in), the full result and its flat gate metrics
(:mod:`rubric_engine.calibration.metrics`). A task borrows a calibration only when all four
pins (rubric hash, prompt hash, model, parameters) are equal and the record's selection is the
default one (every reviewer's stored labels, current pins): a narrower calibration someone ran
afterwards (``--reviewer``, ``--labels FILE``) is kept but never read by the gate, so the gate's
answer does not depend on who calibrated last. Otherwise the calibration is **stale** and
:func:`calibration_metrics` says which pin differs. Records are append-only like labels: the
table refuses UPDATE and DELETE (the store's migration ``m005_calibrations`` creates it).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from rubric_engine.errors import StoreError
from rubric_engine.store.backend import Backend, driver_errors
from rubric_engine.store.task_store import TaskRecord

__all__ = [
    "CalibrationStatus",
    "calibration_metrics",
    "default_selection",
    "describe_selection",
    "save_calibration",
]

#: what a calibration is pinned to: (label, TaskRecord attribute)
PINS = (
    ("rubric hash", "rubric_hash"),
    ("prompt hash", "prompt_hash"),
    ("judge model", "model"),
    ("judge parameters", "judge_params"),
)


def default_selection() -> dict[str, Any]:
    """The selection the gate reads: every reviewer's stored labels, current pins only."""
    return {"reviewers": "all", "labels": "store", "includeChanged": False}


def describe_selection(selection: dict[str, Any] | None) -> str:
    """A selection in words: "all reviewers' stored labels, current pins"."""
    if not selection:
        return "an unrecorded label selection (made before selections were recorded)"
    who = selection.get("reviewers")
    people = "all reviewers'" if who == "all" else f"reviewer(s) {', '.join(who or ())}'"
    labels = selection.get("labels")
    where = (
        "stored labels"
        if labels == "store"
        else f"labels of file {labels.get('file') if isinstance(labels, dict) else labels}"
    )
    pins = (
        "labels of changed requirements included"
        if selection.get("includeChanged")
        else ("current pins")
    )
    rows = f" on {selection['rows']} row(s)" if selection.get("rows") is not None else ""
    return f"{people} {where}{rows}, {pins}"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def save_calibration(
    db: Backend,
    task: TaskRecord,
    result: dict[str, Any],
    metrics: dict[str, float],
    labels: dict[str, Any],
) -> str:
    """Store one calibration record for ``task``; returns its id (``C`` + time + random hex).

    Args:
        labels: which labels were used (reviewers, file name and SHA-256, label count).

    Raises:
        StoreError: the database refused the write.
    """
    now = datetime.now(UTC)
    record_id = "C" + now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    try:
        with db.exclusive("calibrations"):
            _insert(db, record_id, now, task, result, metrics, labels)
    except driver_errors(db) as exc:
        raise StoreError(f"the calibration record was not stored ({exc})") from exc
    return record_id


def _insert(
    db: Backend,
    record_id: str,
    now: datetime,
    task: TaskRecord,
    result: dict[str, Any],
    metrics: dict[str, float],
    labels: dict[str, Any],
) -> None:
    db.execute(
        "INSERT INTO calibrations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            record_id,
            now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            task.id,
            task.rubric_key,
            task.rubric_version,
            task.rubric_hash,
            task.prompt_version,
            task.prompt_hash,
            task.model,
            _dumps(task.judge_params),
            _dumps(labels),
            _dumps(metrics),
            _dumps(result),
        ),
    )


@dataclass(frozen=True)
class CalibrationStatus:
    """What a task may gate on. ``state``: ``current`` (metrics hold), ``stale`` (a record
    exists for the rubric key but was measured under other pins) or ``missing``."""

    state: Literal["current", "stale", "missing"]
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)
    record_id: str | None = None


def calibration_metrics(task: TaskRecord, db: Backend) -> CalibrationStatus:
    """The calibration a task may use: the newest record over the default label selection
    (:func:`default_selection`) with all four pins equal to the task's; otherwise why there is
    none (the newest such record and the pins that differ, records of other selections only,
    or no record at all). Reading creates no table."""
    rows = (
        []
        if "calibrations" not in db.tables()
        else db.execute(
            "SELECT id, task_id, rubric_version, rubric_hash, prompt_hash, model, judge_params, "
            "labels FROM calibrations WHERE rubric_key=? ORDER BY created_at DESC, id DESC",
            (task.rubric_key,),
        ).fetchall()
    )
    how = f"`rubric-eval calibrate {task.id}`"
    if not rows:
        return CalibrationStatus(
            "missing",
            f"no calibration for rubric {task.rubric_key}: import labels "
            f"(`rubric-eval labels import FILE --task {task.id}`) and run {how}",
        )
    default = [row for row in rows if json.loads(row[7]).get("selection") == default_selection()]
    if not default:
        newest = rows[0]
        return CalibrationStatus(
            "missing",
            f"no calibration over {describe_selection(default_selection())} for rubric "
            f"{task.rubric_key}; the newest, {newest[0]}, used "
            f"{describe_selection(json.loads(newest[7]).get('selection'))}, which the gate does "
            f"not read. Run {how} (all reviewers)",
            record_id=newest[0],
        )
    mine = (task.rubric_hash, task.prompt_hash, task.model, _dumps(task.judge_params))
    for row in default:
        if tuple(row[3:7]) == mine:
            metrics = db.execute(
                "SELECT metrics FROM calibrations WHERE id=?", (row[0],)
            ).fetchone()
            return CalibrationStatus(
                "current",
                f"calibration {row[0]} (measured on task {row[1]} over "
                f"{describe_selection(default_selection())}) matches this task's rubric, prompt, "
                "judge model and parameters",
                json.loads(metrics[0]),
                row[0],
            )
    newest = default[0]
    differ = [
        f"{label} {theirs!r} vs this task's {ours!r}"
        for (label, _), theirs, ours in zip(PINS, newest[3:7], mine, strict=True)
        if theirs != ours
    ]
    return CalibrationStatus(
        "stale",
        f"calibration {newest[0]} (task {newest[1]}) is stale for task {task.id}: "
        + "; ".join(differ)
        + f". Calibrate this task: {how}",
        record_id=newest[0],
    )
