"""The three ways to calibrate, wiring store, label files and the pure comparison
(docs/calibration.md): a task's judge against labels, two label files, or two tasks over the
same rows."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rubric_engine.calibration.binary import ratio
from rubric_engine.calibration.compare import calibrate_views
from rubric_engine.calibration.metrics import flat_metrics
from rubric_engine.calibration.record import save_calibration
from rubric_engine.calibration.views import RowView, by_reviewer, view_of_labels, view_of_result
from rubric_engine.errors import InputError
from rubric_engine.labels.io import check_against_task, read_label_file, unknown_fields
from rubric_engine.labels.model import Label
from rubric_engine.labels.store import read_labels
from rubric_engine.store.task_store import TaskStore

__all__ = ["calibrate_files", "calibrate_task", "compare_tasks"]


def _judge_views(task: Any) -> dict[str, RowView]:
    views = (view_of_result(row.result) for row in task.rows)
    return {v.row_id: v for v in views if v is not None}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def calibrate_task(
    store: TaskStore,
    task_id: str,
    *,
    labels_file: Path | None = None,
    reviewers: tuple[str, ...] = (),
    half_width: float | None = None,
    seed: int = 0,
    save: bool = True,
) -> dict[str, Any]:
    """A task's judge results against labels from a file (checked against the task, not
    stored) or from the store (current labels of the task's rubric key on the task's rows).

    Returns:
        The calibration result plus ``pinnedTo`` (what it is pinned to), ``labels`` (what was
        used) and, when saved, ``calibrationId``.

    Raises:
        InputError: the file fails its checks, or no label applies to the task's rows.
        TaskNotFoundError / StoreError: from the store.
    """
    from rubric_engine.report import load_task

    task = load_task(store, task_id)
    task_id = task.record.id  # a name or tag:TAG was resolved to the id
    row_ids = {row.result.row_id for row in task.rows}
    if labels_file is not None:
        labels = check_against_task(read_label_file(labels_file), task, labels_file)
        if reviewers:
            labels = [lab for lab in labels if lab.reviewer in reviewers]
        used: dict[str, Any] = {"file": labels_file.name, "sha256": _sha256(labels_file)}
    else:
        labels = [
            lab
            for lab in read_labels(
                store.backend, rubric_key=task.record.rubric_key, reviewers=reviewers
            )
            if lab.row_id in row_ids
        ]
        used = {"store": True}
    if not labels:
        raise InputError(
            f"no label for the rows of task {task_id}"
            + (f" by {', '.join(reviewers)}" if reviewers else "")
            + ": import some with `rubric-eval labels import FILE --task "
            + f"{task_id}`, or pass --labels FILE"
        )
    used.update(
        # labels made under another version of the rubric (same key) are used, and counted
        otherRubricHash=sum(1 for lab in labels if lab.rubric_hash != task.record.rubric_hash),
        reviewers=sorted({lab.reviewer for lab in labels}),
        count=len(labels),
        labelIds=sorted(lab.label_id for lab in labels if lab.label_id),
    )
    judge = _judge_views(task)
    result = calibrate_views(
        view_of_labels(labels, task.rubric, reviewers),
        judge,
        rubric=task.rubric,
        judge_all=judge,
        reviewers=by_reviewer(labels, task.rubric),
        half_width=half_width,
        seed=seed,
    )
    record = task.record
    result["pinnedTo"] = {
        "taskId": record.id,
        "rubricKey": record.rubric_key,
        "rubricVersion": record.rubric_version,
        "rubricHash": record.rubric_hash,
        "promptVersion": record.prompt_version,
        "promptHash": record.prompt_hash,
        "model": record.model,
        "judgeParams": record.judge_params,
    }
    result["labels"] = used
    if save:
        result["calibrationId"] = save_calibration(
            store.backend, record, result, flat_metrics(result), used
        )
    return result


def calibrate_files(
    judge_file: Path, labels_file: Path, *, half_width: float | None = None, seed: int = 0
) -> dict[str, Any]:
    """Two label files (the judge's and the reference's), no task and no rubric: red flags
    are compared only where both files state them.

    Raises:
        InputError: a file fails its checks, or the files share no row.
    """
    judge_labels: list[Label] = read_label_file(judge_file)
    ref_labels = read_label_file(labels_file)
    judge = view_of_labels(judge_labels)
    reference = view_of_labels(ref_labels)
    if not set(judge) & set(reference):
        raise InputError(
            f"{judge_file} and {labels_file} share no rowId; both must label the same rows "
            f"(e.g. {next(iter(judge))!r} vs {next(iter(reference))!r})"
        )
    result = calibrate_views(
        reference,
        judge,
        reviewers=by_reviewer(ref_labels),
        half_width=half_width,
        seed=seed,
    )
    result["labels"] = {
        side: {
            "file": path.name,
            "sha256": _sha256(path),
            "count": len(labs),
            "unknownFields": unknown_fields(labs),
        }
        for side, path, labs in (
            ("judge", judge_file, judge_labels),
            ("reference", labels_file, ref_labels),
        )
    }
    return result


def compare_tasks(store: TaskStore, task_a: str, task_b: str, *, seed: int = 0) -> dict[str, Any]:
    """Judge against judge over the same rows (two models, or repeated runs of one): the
    calibration of ``task_b`` against ``task_a`` plus ``flipRate`` = (FP + FN) / n, overall and
    per requirement, and the share of rows whose intent or final score differs.

    Raises:
        InputError: the tasks use different rubric keys or share no row.
    """
    from rubric_engine.report import load_task

    a, b = load_task(store, task_a), load_task(store, task_b)
    if a.record.rubric_key != b.record.rubric_key:
        raise InputError(
            f"tasks {task_a} and {task_b} use rubrics {a.record.rubric_key} and "
            f"{b.record.rubric_key}; judge-vs-judge needs the same rubric"
        )
    first, second = _judge_views(a), _judge_views(b)
    shared = sorted(set(first) & set(second))
    if not shared:
        raise InputError(f"tasks {task_a} and {task_b} share no scored row")
    result = calibrate_views(first, second, rubric=a.rubric, judge_all=second, seed=seed)
    for block in (result["overall"], *result["requirements"]):
        block["flipRate"] = ratio(block["fp"] + block["fn"], block["n"])
    result["rowFlips"] = {
        "rows": len(shared),
        "intent": sum(first[r].intent_key != second[r].intent_key for r in shared) / len(shared),
        "finalScore": sum(first[r].score != second[r].score for r in shared) / len(shared),
    }
    result["tasks"] = {"reference": task_a, "judge": task_b}
    return result
